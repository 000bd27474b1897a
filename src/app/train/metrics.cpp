#include "app/train/metrics.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "app/common/options.h"
#include "nn/checkpoint/atomic_file.h"

namespace mpitron::app {

namespace {

// The lines of `path` that stay when a run resumes from step `from_step`: every line but the
// step and evaluation records of later steps. Empty when the file does not exist.
std::string kept_lines(const std::string& path, std::int64_t from_step) {
  std::ifstream file(path);
  std::string kept, line;
  for (std::int64_t number = 1; std::getline(file, line); ++number) {
    if (line.empty()) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw std::runtime_error("--metrics " + path + ":" + std::to_string(number) +
                               ": not JSON, so the resumed run cannot continue it");
    }
    const bool later = record.is_object() && record.contains("step") &&
                       record["step"].is_number_integer() && record["step"] > from_step;
    if (!later) kept += line + "\n";
  }
  return kept;
}

// Whether the file at `path` exists and holds more than white space.
bool holds_records(const std::string& path) {
  std::ifstream file(path);
  return std::find_if(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>(),
                      [](char c) { return std::isspace(static_cast<unsigned char>(c)) == 0; }) !=
         std::istreambuf_iterator<char>();
}

// Moves the file at `path` to "<path>.<n>", the first n from 1 that names no file; returns
// that path. Throws std::runtime_error naming both paths when the move fails.
std::string move_aside(const std::string& path) {
  std::string aside;
  for (int n = 1; aside.empty() || std::filesystem::exists(aside); ++n)
    aside = path + "." + std::to_string(n);
  std::error_code error;
  std::filesystem::rename(path, aside, error);
  if (error) {
    throw std::runtime_error("--metrics " + path + ": cannot move the earlier run's records to " +
                             aside + ": " + error.message());
  }
  return aside;
}

}  // namespace

MetricsFile::MetricsFile(std::string path, bool writer, const nlohmann::json& config,
                         std::optional<std::int64_t> resumed_from)
    : path_(writer ? std::move(path) : std::string()) {
  if (path_.empty()) return;
  if (!resumed_from) {
    if (holds_records(path_)) moved_to_ = move_aside(path_);
    write({{"config", config}});
    return;
  }
  std::string text = kept_lines(path_, *resumed_from);
  if (text.empty()) text = nlohmann::json{{"config", config}}.dump() + "\n";
  text +=
      nlohmann::json{{"resume", {{"from_step", *resumed_from}, {"config", config}}}}.dump() + "\n";
  nn::write_file_atomically(path_, text);
}

void MetricsFile::write(const nlohmann::json& line) const {
  if (!path_.empty()) write_json(path_, line, /*append=*/true);
}

}  // namespace mpitron::app
