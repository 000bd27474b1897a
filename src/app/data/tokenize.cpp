#include "app/data/tokenize.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <span>

#include "app/common/help.h"
#include "app/common/progress.h"
#include "app/common/tokenizer_option.h"
#include "app/common/writable_folder.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "nn/data/token_shard.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace fs = std::filesystem;

namespace {

// Inputs at least this large show the progress line under --progress auto.
constexpr std::uint64_t kProgressMinBytes = std::uint64_t{16} << 20;
constexpr double kMiB = 1024.0 * 1024.0;

// The byte size of every input; throws comm::ConfigError naming the first bad one.
std::vector<std::uint64_t> check_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::uint64_t> sizes;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (fs::is_directory(input, error))
      throw comm::ConfigError(fmt::format("--input {}: is a folder", input));
    if (!fs::exists(input, error))
      throw comm::ConfigError(fmt::format("--input {}: no such file", input));
    if (access(input.c_str(), R_OK) != 0) {
      throw comm::ConfigError(
          fmt::format("--input {}: cannot read: {}", input, std::strerror(errno)));
    }
    sizes.push_back(fs::file_size(input, error));
    if (error) throw comm::ConfigError(fmt::format("--input {}: {}", input, error.message()));
  }
  return sizes;
}

void check_output(const std::string& output) {
  std::error_code error;
  if (fs::exists(output, error) && !fs::is_directory(output, error))
    throw comm::ConfigError(fmt::format("--output {}: exists and is not a folder", output));
}

// Creates the folder `output` if missing; throws comm::ConfigError when it cannot be created or
// written.
void make_output(const std::string& output) {
  std::error_code error;
  fs::create_directories(output, error);
  const std::string why = error ? error.message() : folder_write_error(output);
  if (!why.empty()) {
    throw comm::ConfigError(
        fmt::format("--output {}: cannot create or write the folder: {}", output, why));
  }
}

std::string read_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw std::runtime_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  return bytes;
}

// One shard to write: tokens [begin, end) of the stream.
struct Shard {
  std::string path;
  std::size_t begin = 0, end = 0;
};

// The val shards over tokens [0, val), then the train shards over [val, total), each of at
// most `per_shard` tokens, named <name>_<split>_<index, 6 digits>.bin in `folder`.
std::vector<Shard> plan_shards(const std::string& folder, const std::string& name, std::size_t val,
                               std::size_t total, std::size_t per_shard) {
  std::vector<Shard> shards;
  const auto add = [&](const char* split, std::size_t begin, std::size_t end) {
    for (std::size_t at = begin, index = 0; at < end; at += per_shard, ++index) {
      shards.push_back(
          {(fs::path(folder) / fmt::format("{}_{}_{:06}.bin", name, split, index)).string(), at,
           std::min(end, at + per_shard)});
    }
  };
  add("val", 0, val);
  add("train", val, total);
  return shards;
}

// Whether `file_name` is a shard name this command writes for `name`.
bool is_shard_name(const std::string& file_name, const std::string& name) {
  for (const char* split : {"_val_", "_train_"}) {
    const std::string prefix = name + split;
    if (file_name.size() == prefix.size() + 10 && file_name.starts_with(prefix) &&
        file_name.ends_with(".bin") &&
        std::all_of(file_name.begin() + static_cast<std::ptrdiff_t>(prefix.size()),
                    file_name.end() - 4, [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return false;
}

// Removes the shards named for `name` in `folder` that are not among `written`.
void remove_stale_shards(const std::string& folder, const std::string& name,
                         const std::vector<Shard>& written) {
  std::set<std::string> kept;
  for (const Shard& shard : written)
    kept.insert(fs::path(shard.path).filename().string());
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    const std::string file_name = entry.path().filename().string();
    if (is_shard_name(file_name, name) && !kept.contains(file_name)) fs::remove(entry.path());
  }
}

}  // namespace

CLI::App& add_tokenize_command(CLI::App& app, TokenizeOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "tokenize", "Encode text files with a GPT-2 or Llama 3 tokenizer into llm.c token shards");
  add_run_options(c, o.common);
  c.add_option("--tokenizer", o.tokenizer,
               "GPT-2's encoder.json + vocab.bpe (their folder or either file), llm.c's "
               "gpt2_tokenizer.bin, Llama 3's tokenizer.model, or a tokenizer.json")
      ->required();
  c.add_option("--input", o.inputs,
               "Text files, each one document (the tokenizer's document start before each)")
      ->required()
      ->expected(1, std::numeric_limits<int>::max());
  c.add_option("--output", o.output, "Folder for the shards (created if missing)")->required();
  c.add_option("--name", o.name, "Shard name prefix (default: the first input's name)");
  c.add_option("--val-fraction", o.val_fraction,
               "Share of the tokens, from the start, written as val shards (0 <= F < 1)")
      ->capture_default_str();
  c.add_option("--shard-tokens", o.shard_tokens, "Most tokens per shard")
      ->check(integer_in(1, std::numeric_limits<std::int32_t>::max()))
      ->capture_default_str();
  add_progress_option(c, o.progress, "lines");
  add_example(c,
              "mpitron tokenize --tokenizer gpt2/ --input book.txt --output data --val-fraction "
              "0.05");
  return c;
}

int run_tokenize(const TokenizeOptions& o, comm::Communicator world) {
  std::optional<nn::BpeTokenizer> tokenizer;
  std::vector<std::uint64_t> sizes;
  std::shared_ptr<spdlog::logger> log;
  comm::agree_on_configuration(world, [&] {
    if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0)) {
      throw comm::ConfigError(
          fmt::format("--val-fraction must be in [0, 1), got {}", o.val_fraction));
    }
    sizes = check_inputs(o.inputs);
    check_output(o.output);
    if (o.name.find('/') != std::string::npos || o.name == "." || o.name == "..") {
      throw comm::ConfigError(fmt::format(
          "--name '{}' must be a file name prefix, not a path (the shards go into --output)",
          o.name));
    }
    tokenizer = load_tokenizer_option(o.tokenizer);
    make_output(o.output);
    log = prepare_run(o.common, world);
    return fmt::format("tokenize {} -> {}", fmt::join(o.inputs, " "), o.output);
  });
  if (world.rank() != 0) return 0;

  const std::string name = o.name.empty() ? fs::path(o.inputs.front()).stem().string() : o.name;
  std::uint64_t total_bytes = 0;
  for (const std::uint64_t size : sizes)
    total_bytes += size;
  const ProgressMode mode = parse_progress_mode(o.progress);
  ProgressLine progress(
      "tokenize (MiB)", std::max<std::int64_t>(1, std::llround(std::ceil(total_bytes / kMiB))),
      "MB/s", mode, mode != ProgressMode::automatic || total_bytes >= kProgressMinBytes);
  std::vector<std::int32_t> tokens;
  double encode_seconds = 0.0;
  std::uint64_t done_bytes = 0;
  std::int64_t shown_mib = 0;  // the progress line's last step
  for (const std::string& input : o.inputs) {
    const std::string text = read_input(input);
    const auto start = std::chrono::steady_clock::now();
    tokens.push_back(tokenizer->document_start());
    tokenizer->encode(text, tokens, [&](std::size_t done) {
      const double seconds =
          encode_seconds +
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto bytes = static_cast<double>(done_bytes + done);
      const std::int64_t mib = std::llround(std::ceil(bytes / kMiB));
      if (mib <= shown_mib) return;
      shown_mib = mib;
      progress.update(mib, std::nullopt, bytes / 1e6 / std::max(seconds, 1e-9));
    });
    encode_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done_bytes += text.size();
  }
  progress.suspend();

  const auto val = static_cast<std::size_t>(o.val_fraction * static_cast<double>(tokens.size()));
  const std::vector<Shard> shards =
      plan_shards(o.output, name, val, tokens.size(), static_cast<std::size_t>(o.shard_tokens));
  for (const Shard& shard : shards) {
    nn::write_token_shard(
        shard.path,
        std::span<const std::int32_t>(tokens).subspan(shard.begin, shard.end - shard.begin),
        nn::token_id_width(tokenizer->vocab_size()));
  }
  remove_stale_shards(o.output, name, shards);
  const std::size_t val_shards = val == 0 ? 0 : (val - 1) / o.shard_tokens + 1;
  const double mb_per_s = static_cast<double>(done_bytes) / 1e6 / std::max(encode_seconds, 1e-9);
  log->info(
      "tokenize: {}, {}, {} ({} val, {} train) in {} ({} val, {} train) to {}, "
      "encoded at {:.1f} MB/s",
      nn::counted(static_cast<std::int64_t>(o.inputs.size()), "file"),
      nn::counted(static_cast<std::int64_t>(done_bytes), "byte"),
      nn::counted(static_cast<std::int64_t>(tokens.size()), "token"), val, tokens.size() - val,
      nn::counted(static_cast<std::int64_t>(shards.size()), "shard"), val_shards,
      shards.size() - val_shards, o.output, mb_per_s);
  if (!o.common.json.empty()) {
    nlohmann::json files = nlohmann::json::array();
    for (const Shard& shard : shards)
      files.push_back(shard.path);
    write_json(o.common.json, {{"inputs", o.inputs},
                               {"tokenizer", o.tokenizer},
                               {"bytes", done_bytes},
                               {"tokens", tokens.size()},
                               {"val_tokens", val},
                               {"train_tokens", tokens.size() - val},
                               {"shards", files},
                               {"encode_seconds", encode_seconds},
                               {"mb_per_s", mb_per_s}});
  }
  return 0;
}

}  // namespace mpitron::app
