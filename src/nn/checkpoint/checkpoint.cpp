#include "nn/checkpoint/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "nn/checkpoint/atomic_file.h"

namespace mpitron::nn {
namespace {

// Removes the AtomicFile temporaries directly inside `folder`.
void remove_temporary_files(const std::filesystem::path& folder) {
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (AtomicFile::is_temporary_name(entry.path().filename().string())) {
      std::filesystem::remove(entry.path());
    }
  }
}

constexpr const char* kDone = "DONE";
constexpr const char* kMeta = "meta.json";
constexpr const char* kLatest = "latest";
constexpr const char* kStepPrefix = "step_";
constexpr const char* kSplitDimPrefix = "split_dim:";
constexpr const char* kReplicatedText = "replicated";

/// The integer spelled exactly by `text` (digits only, optional '-'), or nullopt.
std::optional<std::int64_t> parse_integer(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

/// k of a directory name "step_<k>" (k >= 0), or nullopt.
std::optional<std::int64_t> step_of(std::string_view name) {
  const std::string_view prefix = kStepPrefix;
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.front() == '-') return std::nullopt;
  return parse_integer(digits);
}

/// What is wrong with meta["topology"], or "" when it has positive integers tp, pp (and dp when
/// `need_dp`).
std::string topology_problem(const nlohmann::json& meta, bool need_dp) {
  if (!meta.is_object() || !meta.contains("topology") || !meta["topology"].is_object()) {
    return "has no \"topology\" object";
  }
  const nlohmann::json& topology = meta["topology"];
  for (const char* axis : {"tp", "pp", "dp"}) {
    if (!need_dp && std::string_view(axis) == "dp") continue;
    if (!topology.contains(axis) || !topology[axis].is_number_integer() ||
        topology[axis].get<std::int64_t>() < 1) {
      return fmt::format("has topology {} without a positive integer \"{}\"", topology.dump(),
                         axis);
    }
  }
  return "";
}

void check_split_dim(int split_dim, int ndim, const std::string& what) {
  if (split_dim != kReplicated && (split_dim < 0 || split_dim >= ndim)) {
    throw std::invalid_argument(
        fmt::format("{}: split_dim {} is not a dim of a {}-d tensor", what, split_dim, ndim));
  }
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return "";
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

bool is_shard_file_name(const std::string& name) {
  return name.starts_with("shard_tp") && name.ends_with(".safetensors");
}

}  // namespace

TensorRecord full_record(const Parameter& parameter, int tp) {
  if (tp < 1) throw std::invalid_argument(fmt::format("full_record: tp {} < 1", tp));
  check_split_dim(parameter.split_dim, parameter.tensor.ndim(), "full_record " + parameter.name);
  Shape shape = parameter.tensor.shape();
  if (parameter.split_dim != kReplicated) shape[parameter.split_dim] *= tp;
  return {parameter.name, parameter.split_dim, shape, parameter.tensor.dtype()};
}

std::filesystem::path step_directory(const std::filesystem::path& dir, std::int64_t step) {
  return dir / fmt::format("{}{}", kStepPrefix, step);
}

std::filesystem::path shard_path(const std::filesystem::path& dir, std::int64_t step, int tp_rank,
                                 int pp_rank) {
  return step_directory(dir, step) / fmt::format("shard_tp{}_pp{}.safetensors", tp_rank, pp_rank);
}

SafetensorsReader open_shard(const std::filesystem::path& dir, std::int64_t step, int tp_rank,
                             int pp_rank) {
  const std::filesystem::path path = shard_path(dir, step, tp_rank, pp_rank);
  if (!std::filesystem::exists(path)) {
    throw CheckpointError(fmt::format("{}: missing shard file", path.string()));
  }
  SafetensorsReader shard(path);
  const std::map<std::string, std::int64_t> expected = {
      {"tp_rank", tp_rank}, {"pp_rank", pp_rank}, {"step", step}};
  for (const auto& [key, value] : expected) {
    const auto it = shard.metadata().find(key);
    if (it == shard.metadata().end() || parse_integer(it->second) != value) {
      throw CheckpointError(fmt::format("{}: metadata {} is '{}', expected {}", path.string(), key,
                                        it == shard.metadata().end() ? "" : it->second, value));
    }
  }
  return shard;
}

int saved_split_dim(const SafetensorsReader& shard, const std::string& name) {
  const auto it = shard.metadata().find(kSplitDimPrefix + name);
  if (it == shard.metadata().end()) {
    throw CheckpointError(fmt::format("{}: no layout (split_dim) recorded for tensor '{}'",
                                      shard.path().string(), name));
  }
  if (it->second == kReplicatedText) return kReplicated;
  const std::optional<std::int64_t> dim = parse_integer(it->second);
  if (!dim || *dim < 0 || *dim > 64) {
    throw CheckpointError(fmt::format("{}: tensor '{}' has an unreadable layout '{}'",
                                      shard.path().string(), name, it->second));
  }
  return static_cast<int>(*dim);
}

void write_shard(const std::filesystem::path& dir, std::int64_t step, int tp_rank, int pp_rank,
                 const std::vector<ShardTensor>& tensors) {
  if (step < 0 || tp_rank < 0 || pp_rank < 0) {
    throw std::invalid_argument(
        fmt::format("write_shard: step {}, tp rank {}, pp rank {} must be "
                    ">= 0",
                    step, tp_rank, pp_rank));
  }
  SafetensorsMetadata metadata = {{"tp_rank", std::to_string(tp_rank)},
                                  {"pp_rank", std::to_string(pp_rank)},
                                  {"step", std::to_string(step)}};
  std::vector<NamedTensor> named;
  for (const ShardTensor& t : tensors) {
    check_split_dim(t.split_dim, t.tensor.defined() ? t.tensor.ndim() : 0, "write_shard " + t.name);
    metadata[kSplitDimPrefix + t.name] =
        t.split_dim == kReplicated ? std::string(kReplicatedText) : std::to_string(t.split_dim);
    named.push_back({t.name, t.tensor});
  }
  const std::filesystem::path step_dir = step_directory(dir, step);
  std::filesystem::create_directories(step_dir);
  if (std::filesystem::remove(step_dir / kDone)) sync_directory(step_dir);
  write_safetensors(shard_path(dir, step, tp_rank, pp_rank), named, metadata);
}

void finish_step(const std::filesystem::path& dir, std::int64_t step, const nlohmann::json& meta) {
  if (const std::string problem = topology_problem(meta, true); !problem.empty()) {
    throw std::invalid_argument("finish_step: meta " + problem);
  }
  const int tp = meta["topology"]["tp"].get<int>();
  const int pp = meta["topology"]["pp"].get<int>();
  std::set<std::string> shard_names;
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t) {
      open_shard(dir, step, t, p);
      shard_names.insert(shard_path(dir, step, t, p).filename().string());
    }
  }
  const std::filesystem::path step_dir = step_directory(dir, step);
  for (const auto& entry : std::filesystem::directory_iterator(step_dir)) {
    const std::string name = entry.path().filename().string();
    if (is_shard_file_name(name) && shard_names.count(name) == 0) {
      std::filesystem::remove(entry.path());
    }
  }
  // Every writer of this save has committed its files by now, so a temporary file anywhere in
  // the folder is a leftover of an interrupted save (of this step or another).
  remove_interrupted_save_leftovers(dir);
  write_file_atomically(step_dir / kMeta, meta.dump(2) + "\n");
  write_file_atomically(step_dir / kDone, fmt::format("{}\n", step));
  sync_directory(dir);
  write_file_atomically(dir / kLatest, fmt::format("{}{}\n", kStepPrefix, step));
}

void remove_interrupted_save_leftovers(const std::filesystem::path& dir) {
  remove_temporary_files(dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_directory() && step_of(entry.path().filename().string())) {
      remove_temporary_files(entry.path());
    }
  }
}

void remove_steps(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> steps;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_directory() && step_of(entry.path().filename().string())) {
      steps.push_back(entry.path());
    }
  }
  std::filesystem::remove(dir / kLatest);  // first: no reader takes a step being removed
  for (const std::filesystem::path& step : steps)
    std::filesystem::remove_all(step);
  sync_directory(dir);
}

bool step_complete(const std::filesystem::path& dir, std::int64_t step) {
  return std::filesystem::is_regular_file(step_directory(dir, step) / kDone);
}

namespace {

// DIR/latest's text without its trailing newline ("" when there is no file).
std::string latest_text(const std::filesystem::path& dir) {
  std::string named = read_text(dir / kLatest);
  if (named.ends_with('\n')) named.pop_back();
  return named;
}

// The step DIR/latest names, or nothing (no file, or not a step's name).
std::optional<std::int64_t> latest_named(const std::filesystem::path& dir) {
  return step_of(latest_text(dir));
}

}  // namespace

std::optional<std::int64_t> latest_step(const std::filesystem::path& dir) {
  const std::optional<std::int64_t> latest = latest_named(dir);
  if (latest && step_complete(dir, *latest)) return latest;
  std::optional<std::int64_t> newest;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const auto step = step_of(entry.path().filename().string());
    if (step && (!latest || *step < *latest) && (!newest || *step > *newest) &&
        step_complete(dir, *step)) {
      newest = step;
    }
  }
  return newest;
}

std::optional<std::string> latest_passed_over(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / kLatest;
  if (!std::filesystem::is_regular_file(file)) return std::nullopt;
  const std::string text = latest_text(dir);
  const std::optional<std::int64_t> latest = step_of(text);
  if (!latest) {
    constexpr std::size_t kShown = 40;
    return fmt::format("{} holds {:?}{}, not a step's name ({}<k>)", file.string(),
                       text.substr(0, kShown), text.size() > kShown ? "..." : "", kStepPrefix);
  }
  if (step_complete(dir, *latest)) return std::nullopt;
  return fmt::format("{}, which {} names, is not complete (no {} file: being saved, or removed)",
                     step_directory(dir, *latest).string(), file.string(), kDone);
}

std::vector<std::int64_t> complete_steps(const std::filesystem::path& dir) {
  const std::optional<std::int64_t> latest = latest_step(dir);
  if (!latest) return {};
  std::vector<std::int64_t> others;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const auto step = step_of(entry.path().filename().string());
    if (step && *step < *latest && step_complete(dir, *step)) others.push_back(*step);
  }
  std::sort(others.rbegin(), others.rend());
  others.insert(others.begin(), *latest);
  return others;
}

namespace {

// `path` without a trailing separator, so that filename() names its last folder.
std::filesystem::path without_trailing_separator(const std::filesystem::path& path) {
  return path.has_filename() ? path : path.parent_path();
}

}  // namespace

std::optional<StepLocation> locate_step(const std::filesystem::path& path) {
  const std::filesystem::path named = without_trailing_separator(path);
  if (const auto step = step_of(named.filename().string());
      step && std::filesystem::is_directory(named)) {
    const std::filesystem::path dir = named.parent_path().empty() ? "." : named.parent_path();
    if (!step_complete(dir, *step)) return std::nullopt;
    return StepLocation{dir, *step};
  }
  const auto step = latest_step(path);
  if (!step) return std::nullopt;
  return StepLocation{path, *step};
}

std::string no_complete_step_message(const std::filesystem::path& dir) {
  if (step_of(without_trailing_separator(dir).filename().string()) &&
      std::filesystem::is_directory(dir)) {
    return fmt::format("{}: incomplete checkpoint (no DONE marker)", dir.string());
  }
  if (!std::filesystem::is_directory(dir)) {
    return fmt::format("{}: {}", dir.string(),
                       std::filesystem::exists(dir) ? "not a folder" : "no such checkpoint folder");
  }
  // Steps above the one latest names are an abandoned run's (latest_step): named apart.
  const std::optional<std::int64_t> latest = latest_named(dir);
  std::optional<std::int64_t> newest, above;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto step = step_of(entry.path().filename().string());
    if (!step || !entry.is_directory()) continue;
    if (latest && *step > *latest) {
      if (step_complete(dir, *step) && (!above || *step > *above)) above = step;
    } else if (!newest || *step > *newest) {
      newest = step;
    }
  }
  const std::string abandoned =
      above
          ? fmt::format(" ({} above it is from a run resumed before it: --load {} takes it)",
                        step_directory(dir, *above).string(), step_directory(dir, *above).string())
          : std::string();
  if (!newest) {
    return fmt::format("{}: no checkpoint step (no {}<k> folder){}", dir.string(), kStepPrefix,
                       abandoned);
  }
  return fmt::format("{}: incomplete checkpoint (no {} marker), and no other step is complete{}",
                     step_directory(dir, *newest).string(), kDone, abandoned);
}

nlohmann::json read_meta(const std::filesystem::path& dir, std::int64_t step) {
  const std::filesystem::path step_dir = step_directory(dir, step);
  if (!step_complete(dir, step)) {
    throw CheckpointError(
        fmt::format("{}: incomplete checkpoint (no {} marker)", step_dir.string(), kDone));
  }
  const std::filesystem::path path = step_dir / kMeta;
  if (!std::filesystem::exists(path)) {
    throw CheckpointError(fmt::format("{}: missing", path.string()));
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("{}: bad JSON: {}", path.string(), e.what()));
  }
  if (const std::string problem = topology_problem(meta, false); !problem.empty()) {
    throw CheckpointError(fmt::format("{}: {}", path.string(), problem));
  }
  return meta;
}

}  // namespace mpitron::nn
