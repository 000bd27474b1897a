#include "comm/algorithm_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string_view>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "kernels/device.h"

namespace mpitron::comm {

namespace {

constexpr std::array<Algorithm, 4> kAllReduceAlgorithms{
    Algorithm::mpi, Algorithm::recursive_doubling, Algorithm::rabenseifner, Algorithm::ring};
constexpr std::array<Algorithm, 3> kAllGatherAlgorithms{
    Algorithm::mpi, Algorithm::recursive_doubling, Algorithm::ring};
constexpr std::array<Algorithm, 3> kReduceScatterAlgorithms{
    Algorithm::mpi, Algorithm::recursive_halving, Algorithm::ring};
constexpr std::array<Algorithm, 5> kAlgorithms{Algorithm::mpi, Algorithm::recursive_doubling,
                                               Algorithm::rabenseifner, Algorithm::ring,
                                               Algorithm::recursive_halving};

// The version of the file format, the value of its "mpitron_comm_table" key.
constexpr int kFormatVersion = 1;

bool power_of_two(int ranks) {
  return ranks > 1 && (ranks & (ranks - 1)) == 0;
}

template <class T, std::size_t N>
std::optional<T> named(const std::array<T, N>& values, std::string_view name) {
  for (T value : values) {
    if (to_string(value) == name) return value;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Collective op) {
  switch (op) {
    case Collective::all_reduce:
      return "all-reduce";
    case Collective::all_gather:
      return "all-gather";
    case Collective::reduce_scatter:
      return "reduce-scatter";
  }
  return "?";
}

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::mpi:
      return "mpi";
    case Algorithm::recursive_doubling:
      return "recursive-doubling";
    case Algorithm::rabenseifner:
      return "rabenseifner";
    case Algorithm::ring:
      return "ring";
    case Algorithm::recursive_halving:
      return "recursive-halving";
  }
  return "?";
}

std::span<const Algorithm> algorithms_for(Collective op) {
  switch (op) {
    case Collective::all_reduce:
      return kAllReduceAlgorithms;
    case Collective::all_gather:
      return kAllGatherAlgorithms;
    case Collective::reduce_scatter:
      return kReduceScatterAlgorithms;
  }
  return {};
}

bool reduces_in_floating_point(kernels::DType dtype) {
  return kernels::is_floating(dtype) || dtype == kernels::DType::bf16;
}

bool applicable(Collective op, Algorithm algorithm, int ranks, std::size_t numel, bool floating) {
  const auto offered = algorithms_for(op);
  if (std::find(offered.begin(), offered.end(), algorithm) == offered.end()) return false;
  switch (algorithm) {
    case Algorithm::mpi:
      return true;
    case Algorithm::recursive_doubling:
      return op == Collective::all_reduce || power_of_two(ranks);
    case Algorithm::rabenseifner:
      return power_of_two(ranks) && floating && numel >= static_cast<std::size_t>(ranks);
    case Algorithm::ring:
      return op != Collective::all_reduce || (floating && numel >= static_cast<std::size_t>(ranks));
    case Algorithm::recursive_halving:
      return power_of_two(ranks);
  }
  return false;
}

std::optional<Algorithm> AlgorithmTable::lookup(Collective op, int ranks, std::size_t bytes) const {
  for (const AlgorithmChoice& choice : choices) {
    if (choice.op == op && choice.ranks == ranks && choice.from_bytes <= bytes &&
        bytes < choice.below_bytes) {
      return choice.algorithm;
    }
  }
  return std::nullopt;
}

Algorithm fastest(const AlgorithmTiming& timing) {
  std::optional<double> mpi;
  std::optional<std::size_t> best;  // the fastest of mpitron's own
  for (std::size_t i = 0; i < timing.algorithms.size(); ++i) {
    if (timing.algorithms[i] == Algorithm::mpi) {
      mpi = timing.seconds[i];
    } else if (!best || timing.seconds[i] < timing.seconds[*best]) {
      best = i;
    }
  }
  if (best && (!mpi || timing.seconds[*best] < kOwnAlgorithmMargin * *mpi))
    return timing.algorithms[*best];
  return Algorithm::mpi;
}

std::vector<AlgorithmChoice> choices_from(const std::vector<AlgorithmTiming>& timings) {
  const auto between = [](std::size_t a, std::size_t b) {
    return static_cast<std::size_t>(std::llround(std::sqrt(static_cast<double>(a) * b)));
  };
  std::vector<AlgorithmChoice> choices;
  for (std::size_t i = 0; i < timings.size(); ++i) {
    const AlgorithmTiming& t = timings[i];
    const auto same_series = [&](std::size_t j) {
      return j < timings.size() && timings[j].op == t.op && timings[j].ranks == t.ranks;
    };
    const bool first = i == 0 || !same_series(i - 1);
    AlgorithmChoice choice{t.op, t.ranks, first ? 0 : between(timings[i - 1].bytes, t.bytes)};
    choice.below_bytes = same_series(i + 1) ? between(t.bytes, timings[i + 1].bytes) : 2 * t.bytes;
    choice.algorithm = fastest(t);
    if (!first && choices.back().algorithm == choice.algorithm) {
      choices.back().below_bytes = choice.below_bytes;
    } else {
      choices.push_back(choice);
    }
  }
  return choices;
}

std::string AlgorithmTable::to_json() const {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const AlgorithmChoice& c : choices) {
    nlohmann::ordered_json row{
        {"op", to_string(c.op)}, {"ranks", c.ranks}, {"from_bytes", c.from_bytes}};
    if (c.below_bytes != std::numeric_limits<std::size_t>::max())
      row["below_bytes"] = c.below_bytes;
    row["algorithm"] = to_string(c.algorithm);
    rows.push_back(std::move(row));
  }
  // One choice per line: the file stays small and readable.
  std::string text = "{\n  \"mpitron_comm_table\": " + std::to_string(kFormatVersion) +
                     ",\n  \"world_size\": " + std::to_string(world_size) +
                     ",\n  \"measured_on\": " + nlohmann::json(measured_on).dump() +
                     ",\n  \"choices\": [";
  for (std::size_t i = 0; i < rows.size(); ++i)
    text += (i == 0 ? "\n    " : ",\n    ") + rows[i].dump();
  return text + (rows.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

namespace {

[[noreturn]] void reject(const std::string& why) {
  throw ConfigError(why);
}

// The unsigned integer at `key` of `object`, or `fallback` when the key is absent.
std::size_t size_field(const nlohmann::json& object, const char* key, std::size_t index,
                       std::optional<std::size_t> fallback = std::nullopt) {
  const auto found = object.find(key);
  if (found == object.end()) {
    if (fallback) return *fallback;
    reject("choice " + std::to_string(index) + " has no \"" + key + "\"");
  }
  if (!found->is_number_unsigned()) {
    reject("choice " + std::to_string(index) + ": \"" + key +
           "\" must be a non-negative integer, got " + found->dump());
  }
  return found->get<std::size_t>();
}

// Rejects a key of `object` outside `known` (a misspelt "below_bytes" would otherwise widen a
// choice to every size above it); `where` names the object in the message.
void reject_unknown_keys(const nlohmann::json& object,
                         std::initializer_list<std::string_view> known, const std::string& where) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      reject(where + "unknown key \"" + key + "\"");
    }
  }
}

std::string string_field(const nlohmann::json& object, const char* key, std::size_t index) {
  const auto found = object.find(key);
  if (found == object.end() || !found->is_string()) {
    reject("choice " + std::to_string(index) + " needs \"" + key + "\" as a string");
  }
  return found->get<std::string>();
}

}  // namespace

AlgorithmTable AlgorithmTable::parse(std::string_view json_text) {
  const nlohmann::json document = nlohmann::json::parse(json_text, nullptr, false);
  if (document.is_discarded()) reject("not a JSON document");
  if (!document.is_object()) reject("not a JSON object");
  const auto version = document.find("mpitron_comm_table");
  if (version == document.end() || !version->is_number_integer() ||
      version->get<int>() != kFormatVersion) {
    reject("not an mpitron comm table (\"mpitron_comm_table\": " + std::to_string(kFormatVersion) +
           " is missing)");
  }
  reject_unknown_keys(document, {"mpitron_comm_table", "world_size", "measured_on", "choices"}, "");
  AlgorithmTable table;
  const auto world = document.find("world_size");
  if (world == document.end() || !world->is_number_integer() || world->get<long long>() < 1 ||
      world->get<long long>() > std::numeric_limits<int>::max()) {
    reject("\"world_size\" must be a positive integer");
  }
  table.world_size = world->get<int>();
  if (const auto text = document.find("measured_on"); text != document.end() && text->is_string()) {
    table.measured_on = text->get<std::string>();
  }
  const auto choices = document.find("choices");
  if (choices == document.end() || !choices->is_array()) reject("\"choices\" must be an array");
  for (std::size_t i = 0; i < choices->size(); ++i) {
    const nlohmann::json& row = (*choices)[i];
    if (!row.is_object()) reject("choice " + std::to_string(i) + " is not an object");
    reject_unknown_keys(row, {"op", "ranks", "from_bytes", "below_bytes", "algorithm"},
                        "choice " + std::to_string(i) + ": ");
    AlgorithmChoice choice;
    const std::string op = string_field(row, "op", i);
    const auto collective = named(std::to_array(kCollectives), op);
    if (!collective) {
      reject("choice " + std::to_string(i) + ": unknown op \"" + op +
             "\" (all-reduce, all-gather or reduce-scatter)");
    }
    choice.op = *collective;
    const std::string name = string_field(row, "algorithm", i);
    const auto algorithm = named(kAlgorithms, name);
    const auto offered = algorithms_for(choice.op);
    if (!algorithm || std::find(offered.begin(), offered.end(), *algorithm) == offered.end()) {
      std::string names;
      for (Algorithm a : offered)
        names += (names.empty() ? "" : ", ") + std::string(to_string(a));
      reject("choice " + std::to_string(i) + ": " + op + " has no algorithm \"" + name + "\" (" +
             names + ")");
    }
    choice.algorithm = *algorithm;
    const std::size_t ranks = size_field(row, "ranks", i);
    if (ranks < 2 || ranks > static_cast<std::size_t>(table.world_size)) {
      reject("choice " + std::to_string(i) + ": \"ranks\" must be in [2, world_size " +
             std::to_string(table.world_size) + "], got " + std::to_string(ranks));
    }
    choice.ranks = static_cast<int>(ranks);
    if (choice.algorithm != Algorithm::mpi &&
        !applicable(choice.op, choice.algorithm, choice.ranks, choice.ranks, true)) {
      reject("choice " + std::to_string(i) + ": " + name + " needs a power-of-two group, not " +
             std::to_string(ranks) + " ranks");
    }
    choice.from_bytes = size_field(row, "from_bytes", i, 0);
    choice.below_bytes = size_field(row, "below_bytes", i, choice.below_bytes);
    if (choice.from_bytes >= choice.below_bytes) {
      reject("choice " + std::to_string(i) + ": \"from_bytes\" " +
             std::to_string(choice.from_bytes) + " is not below \"below_bytes\" " +
             std::to_string(choice.below_bytes));
    }
    for (std::size_t j = 0; j < table.choices.size(); ++j) {
      const AlgorithmChoice& other = table.choices[j];
      if (other.op == choice.op && other.ranks == choice.ranks &&
          choice.from_bytes < other.below_bytes && other.from_bytes < choice.below_bytes) {
        reject("choice " + std::to_string(i) + ": its sizes overlap those of choice " +
               std::to_string(j) + " (" + op + " on " + std::to_string(ranks) + " ranks)");
      }
    }
    table.choices.push_back(choice);
  }
  return table;
}

AlgorithmTable read_algorithm_table(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  // A directory opens, and reading it then throws from the stream buffer.
  if (!file.is_open() || std::filesystem::is_directory(path)) reject("cannot read the file");
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  if (file.bad()) reject("cannot read the file");
  AlgorithmTable table = AlgorithmTable::parse(text);
  table.source = path;
  return table;
}

namespace {

// Broadcasts rank 0's `text` (its length first; on the other ranks `text` is replaced).
void broadcast_text(const Communicator& world, std::string& text) {
  kernels::Buffer length(1, kernels::DType::i64, kernels::Device::cpu);
  length.data_as<std::int64_t>()[0] = static_cast<std::int64_t>(text.size());
  broadcast(world, length, 0);
  const auto bytes = static_cast<std::size_t>(length.data_as<std::int64_t>()[0]);
  if (bytes == 0) {
    text.clear();
    return;
  }
  kernels::Buffer words((bytes + 7) / 8, kernels::DType::i64, kernels::Device::cpu);
  if (world.rank() == 0) std::memcpy(words.data(), text.data(), bytes);
  broadcast(world, words, 0);
  text.assign(static_cast<const char*>(words.data()), bytes);
}

}  // namespace

std::string agree_on_algorithm_table(Communicator& world, const std::string& path,
                                     bool from_variable) {
  // Rank 0 sends "T" + the path + "\n" + the table's JSON, "E" + its error, or nothing (no table).
  std::string message;
  if (world.rank() == 0 && !path.empty()) {
    try {
      message = "T" + path + "\n" + read_algorithm_table(path).to_json();
    } catch (const ConfigError& error) {
      message = "E" + std::string(from_variable ? kAlgorithmTableVariable : "--comm-table") + " " +
                path + ": " + error.what();
    }
  }
  broadcast_text(world, message);
  if (message.empty()) return "";
  if (message[0] == 'E') throw ConfigError(message.substr(1));
  const std::size_t end_of_path = message.find('\n');
  AlgorithmTable table = AlgorithmTable::parse(std::string_view(message).substr(end_of_path + 1));
  table.source = message.substr(1, end_of_path - 1);
  if (table.world_size != world.size()) {
    return "comm table " + table.source + " was measured on a world of " +
           std::to_string(table.world_size) + " ranks, this one has " +
           std::to_string(world.size()) + ": the built-in rule chooses every algorithm";
  }
  world.set_algorithm_table(std::make_shared<const AlgorithmTable>(std::move(table)));
  return "";
}

ForcedAlgorithm::ForcedAlgorithm(Communicator world, Collective op, int ranks, Algorithm algorithm)
    : world_(std::move(world)) {
  if (const AlgorithmTable* table = world_.algorithm_table())
    saved_ = std::make_shared<const AlgorithmTable>(*table);
  auto forced = std::make_shared<AlgorithmTable>();
  forced->world_size = world_.size();
  forced->choices.push_back({op, ranks, 0, std::numeric_limits<std::size_t>::max(), algorithm});
  world_.set_algorithm_table(std::move(forced));
}

ForcedAlgorithm::~ForcedAlgorithm() {
  world_.set_algorithm_table(saved_);
}

}  // namespace mpitron::comm
