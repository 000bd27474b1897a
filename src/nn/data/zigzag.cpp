#include "nn/data/zigzag.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

// Elements per sequence position of x [batch, seq, ...].
std::size_t row_elements(const autograd::Shape& shape) {
  std::size_t inner = 1;
  for (std::size_t i = 2; i < shape.size(); ++i)
    inner *= static_cast<std::size_t>(shape[i]);
  return inner;
}

void require_sequence_dim(const autograd::Shape& shape) {
  if (shape.size() < 2) {
    throw std::invalid_argument(
        fmt::format("zigzag sharding needs [batch, seq, ...], got {}", autograd::to_string(shape)));
  }
}

}  // namespace

void check_zigzag(std::int64_t seq, int cp, int rank) {
  if (cp < 1) throw std::invalid_argument(fmt::format("cp must be at least 1, got {}", cp));
  if (rank < 0 || rank >= cp) {
    throw std::invalid_argument(fmt::format("context rank {} is outside [0, {})", rank, cp));
  }
  if (seq < 1 || seq % (2 * cp) != 0) {
    throw std::invalid_argument(
        fmt::format("seq {} does not split into 2*cp = {} equal zigzag chunks", seq, 2 * cp));
  }
}

std::vector<std::int64_t> zigzag_positions(std::int64_t seq, int cp, int rank) {
  check_zigzag(seq, cp, rank);
  const std::int64_t chunk = seq / (2 * cp);
  std::vector<std::int64_t> positions;
  positions.reserve(static_cast<std::size_t>(2 * chunk));
  for (std::int64_t index : {std::int64_t{rank}, std::int64_t{2 * cp - 1 - rank}}) {
    for (std::int64_t i = 0; i < chunk; ++i)
      positions.push_back(index * chunk + i);
  }
  return positions;
}

Tensor zigzag_shard(const Tensor& x, int cp, int rank) {
  require_sequence_dim(x.shape());
  const std::int64_t seq = x.shape()[1];
  check_zigzag(seq, cp, rank);
  autograd::Shape shape = x.shape();
  shape[1] = seq / cp;
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  const auto inner = row_elements(shape);
  const auto chunk = static_cast<std::size_t>(seq / (2 * cp)) * inner;
  const auto rows = static_cast<std::size_t>(shape[0]);
  std::size_t chunks[2] = {static_cast<std::size_t>(rank),
                           static_cast<std::size_t>(2 * cp - 1 - rank)};
  if (fault_active(Fault::cp_zigzag_chunks_swapped)) std::swap(chunks[0], chunks[1]);
  for (std::size_t half = 0; half < 2; ++half) {
    kernels::copy_rows(x.buffer(), chunks[half] * chunk, 2 * cp * chunk, out.buffer(), half * chunk,
                       2 * chunk, rows, chunk);
  }
  return out;
}

Tensor zigzag_unshard(const std::vector<Tensor>& shards) {
  if (shards.empty()) throw std::invalid_argument("zigzag_unshard: no shards");
  const Tensor& first = shards.front();
  require_sequence_dim(first.shape());
  for (const Tensor& shard : shards) {
    if (shard.shape() != first.shape() || shard.dtype() != first.dtype() ||
        shard.device() != first.device()) {
      throw std::invalid_argument(fmt::format("zigzag_unshard: shards {} and {} differ",
                                              autograd::to_string(first.shape()),
                                              autograd::to_string(shard.shape())));
    }
  }
  const auto cp = static_cast<std::size_t>(shards.size());
  if (first.shape()[1] % 2 != 0) {
    throw std::invalid_argument(fmt::format(
        "zigzag_unshard: a shard of {} positions is not two equal chunks", first.shape()[1]));
  }
  autograd::Shape shape = first.shape();
  shape[1] *= static_cast<std::int64_t>(cp);
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  const auto chunk = static_cast<std::size_t>(first.shape()[1] / 2) * row_elements(shape);
  const auto rows = static_cast<std::size_t>(shape[0]);
  for (std::size_t c = 0; c < cp; ++c) {
    const std::size_t chunks[2] = {c, 2 * cp - 1 - c};
    for (std::size_t half = 0; half < 2; ++half) {
      kernels::copy_rows(shards[c].buffer(), half * chunk, 2 * chunk, out.buffer(),
                         chunks[half] * chunk, 2 * cp * chunk, rows, chunk);
    }
  }
  return out;
}

ZigzagTokenBatch zigzag_token_batch(const TokenBatch& global, int cp, int rank) {
  const std::int64_t seq = global.inputs.shape().at(1);
  const std::vector<std::int64_t> positions = zigzag_positions(seq, cp, rank);
  return {{zigzag_shard(global.inputs, cp, rank), zigzag_shard(global.targets, cp, rank)},
          Tensor::from_indices(positions, {static_cast<std::int64_t>(positions.size())},
                               global.inputs.device())};
}

}  // namespace mpitron::nn
