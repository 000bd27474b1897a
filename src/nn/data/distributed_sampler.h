// Which samples each data-parallel replica reads in an epoch, with the semantics of PyTorch's
// torch.utils.data.DistributedSampler (shuffle, padding, drop_last), and the split of a
// replica's index list into batches (torch.utils.data.DataLoader with drop_last=False).
#pragma once

#include <cstdint>
#include <vector>

namespace mpitron::nn {

/// The indices replica `rank` of `replicas` reads, epoch by epoch.
///
/// Each epoch starts from a permutation of [0, samples): the identity without shuffling, else a
/// Fisher-Yates shuffle driven by autograd::uniform with seed `seed + epoch` (the same on every
/// rank; not torch.randperm's stream). Without drop_last the list is padded to
/// replicas * ceil(samples / replicas) by repeating it from its start; with drop_last it is cut
/// to replicas * floor(samples / replicas). Replica r then takes positions r, r + replicas, ...
/// so every replica gets `samples_per_replica()` indices and runs the same number of steps.
class DistributedSampler {
 public:
  /// Throws std::invalid_argument when samples < 1, replicas < 1, rank is outside
  /// [0, replicas), or drop_last leaves no sample per replica (samples < replicas).
  DistributedSampler(std::int64_t samples, int replicas, int rank, std::uint64_t seed,
                     bool shuffle = true, bool drop_last = false);

  /// Indices every replica gets per epoch (ceil(samples / replicas) without drop_last,
  /// floor(samples / replicas) with it).
  std::int64_t samples_per_replica() const { return per_replica_; }

  /// The epoch's permutation of [0, samples) shared by every replica, before padding.
  std::vector<std::int64_t> permutation(std::int64_t epoch) const;

  /// This replica's indices for `epoch`: [samples_per_replica()].
  std::vector<std::int64_t> indices(std::int64_t epoch) const;

 private:
  std::int64_t samples_;
  int replicas_;
  int rank_;
  std::uint64_t seed_;
  bool shuffle_;
  std::int64_t per_replica_;
};

/// Splits `indices` into consecutive batches of `batch_size`; the last one holds the remainder
/// (it is kept, like DataLoader's default drop_last=False). Throws std::invalid_argument when
/// batch_size < 1.
std::vector<std::vector<std::int64_t>> make_batches(const std::vector<std::int64_t>& indices,
                                                    std::int64_t batch_size);

}  // namespace mpitron::nn
