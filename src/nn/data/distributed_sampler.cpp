#include "nn/data/distributed_sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "autograd/random.h"

namespace mpitron::nn {

DistributedSampler::DistributedSampler(std::int64_t samples, int replicas, int rank,
                                       std::uint64_t seed, bool shuffle, bool drop_last)
    : samples_(samples), replicas_(replicas), rank_(rank), seed_(seed), shuffle_(shuffle) {
  if (samples < 1 || replicas < 1 || rank < 0 || rank >= replicas) {
    throw std::invalid_argument(fmt::format(
        "DistributedSampler: need samples >= 1 and 0 <= rank < replicas, got samples {}, rank "
        "{}, replicas {}",
        samples, rank, replicas));
  }
  per_replica_ = drop_last ? samples / replicas : (samples + replicas - 1) / replicas;
  if (per_replica_ < 1) {
    throw std::invalid_argument(
        fmt::format("DistributedSampler: drop_last leaves no sample for {} replicas of {} samples",
                    replicas, samples));
  }
}

std::vector<std::int64_t> DistributedSampler::permutation(std::int64_t epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(samples_));
  std::iota(order.begin(), order.end(), 0);
  if (!shuffle_) return order;
  // Fisher-Yates from the last position down: swap i with j uniform in [0, i].
  const std::vector<double> u =
      autograd::uniform({samples_}, seed_ + static_cast<std::uint64_t>(epoch), 0.0, 1.0,
                        autograd::DType::f64)
          .to_vector();
  for (std::int64_t i = samples_ - 1; i > 0; --i) {
    const auto scaled =
        static_cast<std::int64_t>(u[static_cast<std::size_t>(i)] * static_cast<double>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(std::min(scaled, i))]);
  }
  return order;
}

std::vector<std::int64_t> DistributedSampler::indices(std::int64_t epoch) const {
  const std::vector<std::int64_t> order = permutation(epoch);
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_replica_));
  // Position p of the padded (or cut) list is order[p mod samples].
  for (std::int64_t k = 0; k < per_replica_; ++k) {
    const std::int64_t position = rank_ + k * replicas_;
    mine.push_back(order[static_cast<std::size_t>(position % samples_)]);
  }
  return mine;
}

std::vector<std::vector<std::int64_t>> make_batches(const std::vector<std::int64_t>& indices,
                                                    std::int64_t batch_size) {
  if (batch_size < 1) {
    throw std::invalid_argument(fmt::format("make_batches: batch size {} < 1", batch_size));
  }
  std::vector<std::vector<std::int64_t>> batches;
  const auto step = static_cast<std::size_t>(batch_size);
  for (std::size_t first = 0; first < indices.size(); first += step) {
    const std::size_t last = std::min(indices.size(), first + step);
    batches.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(first),
                         indices.begin() + static_cast<std::ptrdiff_t>(last));
  }
  return batches;
}

}  // namespace mpitron::nn
