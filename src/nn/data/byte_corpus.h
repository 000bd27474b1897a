// Text for language-model training read as bytes (vocabulary 256): the train / validation split,
// the seeded window sampler whose union over replicas and micro-batches is the same set of
// sequences for every topology, and the validation windows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/data/distributed_sampler.h"

namespace mpitron::nn {

using autograd::Device;
using autograd::Tensor;

/// A corpus held identically by every rank: its first 90 % trains, the last 10 % validates.
class ByteCorpus {
 public:
  /// Reads `path` whole. Throws std::runtime_error "<path>: cannot read: <reason>",
  /// "<path>: is a directory" or "<path>: empty file".
  static ByteCorpus from_file(const std::string& path);

  /// The built-in corpus (about 64 KiB of generated English-like sentences, the same bytes on
  /// every machine), for runs without a data file.
  static ByteCorpus builtin();

  /// Wraps `bytes`; `source` names it in messages.
  ByteCorpus(std::vector<std::uint8_t> bytes, std::string source);

  const std::vector<std::uint8_t>& bytes() const { return bytes_; }
  const std::string& source() const { return source_; }
  /// Bytes [0, split) train, [split, size) validate; split = floor(0.9 size).
  std::size_t split() const { return bytes_.size() * 9 / 10; }

  /// FNV-1a hash of the bytes (ranks compare it to prove they read the same data).
  std::uint64_t fingerprint() const;

 private:
  std::vector<std::uint8_t> bytes_;
  std::string source_;
};

/// A batch of sequences: inputs and targets (int64) [batch, seq], targets shifted by one byte.
struct TokenBatch {
  Tensor inputs;
  Tensor targets;
};

/// The windows of `seq + 1` bytes starting at `starts` (each start + seq < bytes.size()), as
/// inputs bytes[s, s + seq) and targets bytes[s + 1, s + seq + 1).
TokenBatch make_token_batch(const std::vector<std::uint8_t>& bytes,
                            const std::vector<std::int64_t>& starts, std::int64_t seq,
                            Device device);

/// Replica `replica`'s share of a global batch (inputs and targets [batch, seq]): rows
/// [replica batch/replicas, (replica+1) batch/replicas), cut into `micro_batches` consecutive
/// micro-batches. Throws std::invalid_argument unless batch divides by replicas * micro_batches.
std::vector<TokenBatch> replica_micro_batches(const TokenBatch& global, int replicas, int replica,
                                              std::int64_t micro_batches);

/// Which training windows a data-parallel replica reads at each step.
///
/// The window starts are [0, train_bytes - seq) (every window of seq + 1 bytes inside the
/// training split). Each epoch is a seeded permutation of them (DistributedSampler with one
/// replica, seed `seed`, epoch e shuffled with seed + e); step k of an epoch uses positions
/// [k G, (k+1) G) of it for the global batch G, and replica d takes positions
/// k G + d + j dp, j in [0, G/dp) (DistributedSampler's rank-strided split). So the union over
/// replicas of one step's windows does not depend on dp, tp, pp or the micro-batch size.
/// Epochs hold floor(windows / G) steps (the tail of a permutation is dropped).
class WindowSampler {
 public:
  /// Throws std::invalid_argument when the training split is shorter than seq + 1 bytes
  /// ("training data of N bytes is shorter than one window of seq + 1 = M bytes"), when
  /// global_batch is not divisible by replicas, or when an epoch would hold no step.
  WindowSampler(std::int64_t train_bytes, std::int64_t seq, std::int64_t global_batch, int replicas,
                int replica, std::uint64_t seed);

  /// This replica's window starts of step `step` (0-based over the whole run), in the order
  /// j = 0, 1, ...: [global_batch / replicas].
  std::vector<std::int64_t> starts(std::int64_t step);

  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }

 private:
  std::int64_t global_batch_;
  int replicas_, replica_;
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
