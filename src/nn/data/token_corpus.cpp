#include "nn/data/token_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "nn/data/token_shard.h"
#include "nn/wording.h"

namespace mpitron::nn {

namespace {

// The bytes widened to ids 0..255, the first 90 % training.
TokenCorpus byte_corpus(const std::string& text, std::string source) {
  std::vector<std::uint32_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i)
    tokens[i] = static_cast<unsigned char>(text[i]);
  const std::size_t split = tokens.size() * 9 / 10;
  return TokenCorpus(std::move(tokens), split, std::move(source), /*bytes=*/true);
}

bool starts_with_shard_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::int32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), sizeof magic) &&
         (magic == kTokenShardMagic || magic == kTokenShard32Magic);
}

}  // namespace

TokenCorpus::TokenCorpus(std::vector<std::uint32_t> tokens, std::size_t split, std::string source,
                         bool bytes)
    : tokens_(std::move(tokens)), split_(split), source_(std::move(source)), bytes_(bytes) {}

namespace {

// The whole file `path`, which must not be empty.
std::string read_text(const std::string& path) {
  // A directory opens as a stream on Linux and fails only on the first read, with a message
  // that lacks the path.
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored))
    throw std::runtime_error(fmt::format("{}: is a directory", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(fmt::format("{}: cannot read", path));
  if (bytes.empty()) throw std::runtime_error(fmt::format("{}: empty file", path));
  return bytes;
}

}  // namespace

TokenCorpus TokenCorpus::from_file(const std::string& path) {
  return byte_corpus(read_text(path), path);
}

TokenCorpus TokenCorpus::from_text(const std::string& path, BpeTokenizer& tokenizer) {
  std::vector<std::int32_t> ids{tokenizer.document_start()};
  tokenizer.encode(read_text(path), ids);
  std::vector<std::uint32_t> tokens(ids.begin(), ids.end());
  const std::size_t split = tokens.size() * 9 / 10;
  return TokenCorpus(std::move(tokens), split, path, /*bytes=*/false);
}

TokenCorpus TokenCorpus::from_shards(const std::string& spec, std::int64_t vocab,
                                     ValShardsAlone val_alone) {
  const TokenShardFiles files = list_token_shards(spec);
  if (files.train.empty() && (files.val.empty() || val_alone == ValShardsAlone::refused)) {
    throw std::runtime_error(fmt::format("{}: no training shards (*train*.bin)", spec));
  }
  std::vector<std::uint32_t> tokens;
  const auto append = [&](const std::vector<std::string>& paths) {
    for (const std::string& path : paths) {
      const std::vector<std::uint32_t> shard =
          read_token_shard(path, static_cast<std::int32_t>(vocab));
      tokens.insert(tokens.end(), shard.begin(), shard.end());
    }
  };
  append(files.train);
  const std::size_t train = tokens.size();
  append(files.val);
  const std::size_t split = files.val.empty() ? train * 9 / 10 : train;
  return TokenCorpus(std::move(tokens), split, spec, /*bytes=*/false);
}

bool names_token_shards(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_regular_file(path, error)) {
    return path.ends_with(".bin") || starts_with_shard_magic(path);
  }
  // A missing file that is no pattern reads as text, whose error names it.
  return std::filesystem::exists(path, error) || path.find_first_of("*?[") != std::string::npos;
}

TokenCorpus TokenCorpus::from_data(const std::string& path, std::int64_t vocab,
                                   ValShardsAlone val_alone) {
  return names_token_shards(path) ? from_shards(path, vocab, val_alone) : from_file(path);
}

TokenCorpus TokenCorpus::builtin() {
  // Sentences drawn from small word lists by a fixed linear congruential generator: enough
  // structure (spelling, spacing, punctuation, agreement) for a byte model to learn.
  static const char* const subjects[] = {"the rank",   "every stage",  "a replica",  "the model",
                                         "each layer", "the gradient", "our kernel", "the batch"};
  static const char* const verbs[] = {"sends",  "receives", "reduces",   "gathers",
                                      "checks", "computes", "waits for", "averages"};
  static const char* const objects[] = {"the activations", "its shard",    "a micro-batch",
                                        "the loss",        "every weight", "the next stage",
                                        "the dense model", "one message"};
  static const char* const endings[] = {
      ".", " again.", " in order.", " before the step.", ", then stops.", " on time."};
  std::string text;
  std::uint64_t state = 20261130;
  const auto pick = [&](std::size_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>((state >> 33) % n);
  };
  while (text.size() < 65536) {
    std::string sentence = std::string(subjects[pick(8)]) + " " + verbs[pick(8)] + " " +
                           objects[pick(8)] + endings[pick(6)];
    sentence[0] = static_cast<char>(sentence[0] - 'a' + 'A');
    text += sentence + (pick(5) == 0 ? "\n" : " ");
  }
  return byte_corpus(text, "built-in corpus");
}

std::uint64_t TokenCorpus::fingerprint() const {
  std::uint64_t hash = 1469598103934665603ull;
  for (const std::uint32_t token : tokens_)
    hash = (hash ^ token) * 1099511628211ull;
  return hash;
}

TokenBatch make_token_batch(const std::vector<std::uint32_t>& bytes,
                            const std::vector<std::int64_t>& starts, std::int64_t seq,
                            Device device) {
  std::vector<std::int64_t> inputs, targets;
  inputs.reserve(starts.size() * static_cast<std::size_t>(seq));
  targets.reserve(inputs.capacity());
  for (const std::int64_t start : starts) {
    if (start < 0 || start + seq + 1 > static_cast<std::int64_t>(bytes.size())) {
      throw std::out_of_range(fmt::format("make_token_batch: window [{}, {}) outside {} tokens",
                                          start, start + seq + 1, bytes.size()));
    }
    for (std::int64_t i = 0; i < seq; ++i) {
      inputs.push_back(bytes[static_cast<std::size_t>(start + i)]);
      targets.push_back(bytes[static_cast<std::size_t>(start + i + 1)]);
    }
  }
  const auto batch = static_cast<std::int64_t>(starts.size());
  return {Tensor::from_indices(inputs, {batch, seq}, device),
          Tensor::from_indices(targets, {batch, seq}, device)};
}

namespace {

// Rows [first, first + count) of an int64 [rows, cols] tensor, on the host.
Tensor rows_of(const Tensor& ids, std::int64_t first, std::int64_t count) {
  const std::vector<double> all = ids.to_vector();
  const std::int64_t cols = ids.size(1);
  const std::vector<std::int64_t> mine(all.begin() + first * cols,
                                       all.begin() + (first + count) * cols);
  return Tensor::from_indices(mine, {count, cols}, ids.device());
}

}  // namespace

std::vector<TokenBatch> replica_micro_batches(const TokenBatch& global, int replicas, int replica,
                                              std::int64_t micro_batches) {
  const std::int64_t batch = global.inputs.size(0);
  if (replicas < 1 || micro_batches < 1 || batch % (replicas * micro_batches) != 0) {
    throw std::invalid_argument(
        fmt::format("a batch of {} sequences does not split into {} replicas x {} micro-batches",
                    batch, replicas, micro_batches));
  }
  const std::int64_t micro = batch / replicas / micro_batches;
  std::vector<TokenBatch> batches;
  for (std::int64_t i = 0; i < micro_batches; ++i) {
    const std::int64_t first = (replica * micro_batches + i) * micro;
    batches.push_back(
        {rows_of(global.inputs, first, micro), rows_of(global.targets, first, micro)});
  }
  return batches;
}

namespace {

std::int64_t window_count(std::int64_t train_bytes, std::int64_t seq) {
  if (train_bytes < seq + 1) {
    throw std::invalid_argument(
        fmt::format("training data of {} is shorter than one window of seq + 1 = {} tokens",
                    counted(train_bytes, "token"), seq + 1));
  }
  return train_bytes - seq;
}

}  // namespace

WindowSampler::WindowSampler(std::int64_t train_bytes, std::int64_t seq, std::int64_t global_batch,
                             int replicas, int replica, std::uint64_t seed, DataOrder order)
    : seq_(seq),
      global_batch_(global_batch),
      replicas_(replicas),
      replica_(replica),
      order_(order),
      epochs_(window_count(train_bytes, seq), 1, 0, seed),
      steps_per_epoch_(order == DataOrder::random
                           ? (train_bytes - seq) / std::max<std::int64_t>(1, global_batch)
                           : (train_bytes - 1) / std::max<std::int64_t>(1, global_batch * seq)) {
  if (global_batch < 1 || global_batch % replicas != 0) {
    throw std::invalid_argument(
        fmt::format("global batch {} is not divisible by the {} data-parallel replicas",
                    global_batch, replicas));
  }
  if (steps_per_epoch_ < 1) {
    throw std::invalid_argument(
        fmt::format("training data holds {} of {} tokens, fewer than one global batch of {}",
                    counted(train_bytes - seq, "window"), seq + 1, global_batch));
  }
}

std::vector<std::int64_t> WindowSampler::starts(std::int64_t step) {
  if (order_ == DataOrder::sequential) {
    const std::int64_t first = (step % steps_per_epoch_) * global_batch_ + replica_;
    std::vector<std::int64_t> mine;
    for (std::int64_t j = 0; j < global_batch_ / replicas_; ++j)
      mine.push_back((first + j * replicas_) * seq_);
    return mine;
  }
  const std::int64_t epoch = step / steps_per_epoch_;
  if (epoch != cached_epoch_) {
    permutation_ = epochs_.permutation(epoch);
    cached_epoch_ = epoch;
  }
  const std::int64_t first = (step % steps_per_epoch_) * global_batch_ + replica_;
  std::vector<std::int64_t> mine;
  for (std::int64_t j = 0; j < global_batch_ / replicas_; ++j) {
    mine.push_back(permutation_[static_cast<std::size_t>(first + j * replicas_)]);
  }
  return mine;
}

std::vector<std::int64_t> evaluation_starts(std::int64_t length, std::int64_t seq,
                                            std::int64_t limit, int replicas, int replica) {
  std::int64_t windows = length > 0 ? (length - 1) / seq : 0;
  if (limit > 0) windows = std::min(windows, limit);
  std::vector<std::int64_t> mine;
  for (std::int64_t i = replica; i < windows; i += replicas)
    mine.push_back(i * seq);
  return mine;
}

}  // namespace mpitron::nn
