// The tokens of language-model training: a text file read as bytes (vocabulary 256) or llm.c's
// token shards (GPT-2's or Llama 3's ids, held as uint32); the train / validation split, the seeded
// window sampler whose union over replicas and micro-batches is the same set of sequences for every
// topology (or llm.c's sequential order), and the validation windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/data/bpe_tokenizer.h"
#include "nn/data/distributed_sampler.h"

namespace mpitron::nn {

using autograd::Device;
using autograd::Tensor;

/// Whether llm.c token shards may be val shards alone: training needs train shards; scoring
/// (eval) takes val shards alone, which then all validate (split 0).
enum class ValShardsAlone { refused, taken };

/// A corpus held identically by every rank: tokens [0, split) train, [split, size) validate.
class TokenCorpus {
 public:
  /// Reads `path` whole as bytes (ids 0..255); the first 90 % trains. Throws
  /// std::runtime_error "<path>: cannot read: <reason>", "<path>: is a directory" or "<path>:
  /// empty file".
  static TokenCorpus from_file(const std::string& path);

  /// The llm.c token shards `spec` names (list_token_shards: one file, a folder or a glob): the
  /// train shards in name order, then the val shards; without val shards the first 90 % of the
  /// train tokens trains; val shards alone, where `val_alone` takes them, all validate. Throws
  /// std::runtime_error, one line naming the file, for a missing, damaged or truncated shard or
  /// a token >= vocab (read_token_shard), and "<spec>: no training shards (*train*.bin)" for
  /// none, or val shards alone that `val_alone` refuses.
  static TokenCorpus from_shards(const std::string& spec, std::int64_t vocab,
                                 ValShardsAlone val_alone = ValShardsAlone::refused);

  /// The text file `path` as `tokenizer`'s ids: its end-of-text id, then the encoded text (the
  /// ids `mpitron tokenize` writes for the file as one document); the first 90 % trains. Throws
  /// from_file's errors.
  static TokenCorpus from_text(const std::string& path, BpeTokenizer& tokenizer);

  /// `path` as shards when names_token_shards(path) (from_shards, `val_alone` passed on), else
  /// as bytes (from_file).
  static TokenCorpus from_data(const std::string& path, std::int64_t vocab,
                               ValShardsAlone val_alone = ValShardsAlone::refused);

  /// The built-in corpus (about 64 KiB of generated English-like sentences, the same bytes on
  /// every machine), for runs without a data file.
  static TokenCorpus builtin();

  /// Wraps `tokens`; [0, split) trains; `source` names it in messages; `bytes` says the tokens
  /// are a file's bytes.
  TokenCorpus(std::vector<std::uint32_t> tokens, std::size_t split, std::string source, bool bytes);

  const std::vector<std::uint32_t>& tokens() const { return tokens_; }
  const std::string& source() const { return source_; }
  /// Tokens [0, split) train, [split, size) validate.
  std::size_t split() const { return split_; }
  /// Whether the tokens are a text's bytes (losses then convert to bits per byte).
  bool is_bytes() const { return bytes_; }
  /// "byte" or "token", for messages.
  const char* unit() const { return bytes_ ? "byte" : "token"; }

  /// FNV-1a hash of the tokens (ranks compare it to prove they read the same data).
  std::uint64_t fingerprint() const;

 private:
  std::vector<std::uint32_t> tokens_;
  std::size_t split_;
  std::string source_;
  bool bytes_;
};

/// Whether --data `path` names llm.c token shards rather than a text file: a folder, a glob
/// pattern (when no file has that name), a file named *.bin or one that starts with the shard
/// magic 20240520 or 20240801.
bool names_token_shards(const std::string& path);

/// A batch of sequences: inputs and targets (int64) [batch, seq], targets shifted by one token.
struct TokenBatch {
  Tensor inputs;
  Tensor targets;
};

/// The windows of `seq + 1` tokens starting at `starts` (each start + seq < tokens.size()), as
/// inputs tokens[s, s + seq) and targets tokens[s + 1, s + seq + 1). Throws std::out_of_range
/// for a window outside the tokens.
TokenBatch make_token_batch(const std::vector<std::uint32_t>& tokens,
                            const std::vector<std::int64_t>& starts, std::int64_t seq,
                            Device device);

/// Replica `replica`'s share of a global batch (inputs and targets [batch, seq]): rows
/// [replica batch/replicas, (replica+1) batch/replicas), cut into `micro_batches` consecutive
/// micro-batches. Throws std::invalid_argument unless batch divides by replicas * micro_batches.
std::vector<TokenBatch> replica_micro_batches(const TokenBatch& global, int replicas, int replica,
                                              std::int64_t micro_batches);

/// The order of the training windows: seeded random windows at any offset, or llm.c's
/// sequential batches.
enum class DataOrder { random, sequential };

/// Which training windows a data-parallel replica reads at each step.
///
/// `random`: the window starts are [0, train_bytes - seq) (every window of seq + 1 tokens inside
/// the training split). Each epoch is a seeded permutation of them (DistributedSampler with one
/// replica, seed `seed`, epoch e shuffled with seed + e); step k of an epoch uses positions
/// [k G, (k+1) G) of it for the global batch G, and replica d takes positions
/// k G + d + j dp, j in [0, G/dp) (DistributedSampler's rank-strided split). So the union over
/// replicas of one step's windows does not depend on dp, tp, pp or the micro-batch size.
/// Epochs hold floor(windows / G) steps (the tail of a permutation is dropped).
///
/// `sequential` (llm.c's DataLoader geometry, so a run lines up with llm.c's): step k of an
/// epoch reads the G T + 1 tokens from k G T on, sequence i of them starting at (k G + i) T;
/// replica d takes sequences d + j dp as above. Epochs hold floor((train_bytes - 1) / (G T))
/// steps, then start again at token 0.
class WindowSampler {
 public:
  /// Throws std::invalid_argument when the training split is shorter than seq + 1 tokens
  /// ("training data of N tokens is shorter than one window of seq + 1 = M tokens"), when
  /// global_batch is not divisible by replicas, or when an epoch would hold no step.
  WindowSampler(std::int64_t train_bytes, std::int64_t seq, std::int64_t global_batch, int replicas,
                int replica, std::uint64_t seed, DataOrder order = DataOrder::random);

  /// This replica's window starts of step `step` (0-based over the whole run), in the order
  /// j = 0, 1, ...: [global_batch / replicas].
  std::vector<std::int64_t> starts(std::int64_t step);

  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  std::int64_t seq_, global_batch_;
  int replicas_, replica_;
  DataOrder order_;
  DistributedSampler epochs_;
  std::int64_t steps_per_epoch_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> permutation_;
};

/// Starts of the non-overlapping evaluation windows of a byte range of length `length`: 0, seq,
/// 2 seq, ... for every window whose targets fit (start + seq + 1 <= length), at most
/// `limit` of them when limit > 0, then replica d's share: positions d, d + replicas, ...
std::vector<std::int64_t> evaluation_starts(std::int64_t length, std::int64_t seq,
                                            std::int64_t limit, int replicas, int replica);

}  // namespace mpitron::nn
