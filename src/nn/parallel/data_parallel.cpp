#include "nn/parallel/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "comm/collectives.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

void check_uniform(const Parameters& parameters) {
  for (const Parameter& p : parameters) {
    const Tensor& first = parameters.front().tensor;
    if (p.tensor.dtype() != first.dtype() || p.tensor.device() != first.device()) {
      throw std::invalid_argument(fmt::format(
          "DataParallelGradients: {} is {} on {}, {} is {} on {}", parameters.front().name,
          kernels::to_string(first.dtype()), kernels::to_string(first.device()), p.name,
          kernels::to_string(p.tensor.dtype()), kernels::to_string(p.tensor.device())));
    }
  }
}

}  // namespace

DataParallelGradients::DataParallelGradients(const Parameters& parameters,
                                             const comm::Communicator& dp,
                                             std::size_t bucket_elements,
                                             const GradientSharding& sharding, comm::Wire wire)
    : dp_(dp),
      parameters_(parameters),
      sharded_(sharding.enabled && dp.size() > 1),
      wire_(wire),
      offset_of_(parameters.size()),
      views_(parameters.size()),
      owned_(parameters.size()),
      bucket_of_(parameters.size()),
      passes_seen_(parameters.size(), 0) {
  if (bucket_elements == 0) {
    throw std::invalid_argument("DataParallelGradients: bucket_elements must be >= 1");
  }
  if (parameters_.empty()) return;
  check_uniform(parameters_);
  if (wire_ == comm::Wire::bf16 && parameters_.front().tensor.dtype() != kernels::DType::f32) {
    throw std::invalid_argument(
        "DataParallelGradients: reducing in bfloat16 needs float32 gradients, not " +
        kernels::to_string(parameters_.front().tensor.dtype()));
  }

  // The layout. Reverse order: the parameters backward finishes first lead the buffer and the
  // first bucket. Sharded, each bucket is padded to a multiple of dp elements.
  const auto replicas = static_cast<std::size_t>(dp_.size());
  std::vector<std::pair<std::size_t, std::size_t>> bounds;  // per bucket, [start, end)
  std::size_t offset = 0, bucket_start = 0;
  const auto close_bucket = [&] {
    if (offset == bucket_start) return;
    if (sharded_) offset = (offset + replicas - 1) / replicas * replicas;
    bounds.emplace_back(bucket_start, offset);
    bucket_start = offset;
  };
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    const bool alone = sharded_ && std::find(sharding.own_bucket.begin(), sharding.own_bucket.end(),
                                             parameters_[i].name) != sharding.own_bucket.end();
    if (alone) close_bucket();
    offset_of_[i] = static_cast<std::int64_t>(offset);
    bucket_of_[i] = bounds.size();
    offset += static_cast<std::size_t>(parameters_[i].tensor.numel());
    if (alone || offset - bucket_start >= bucket_elements) close_bucket();
  }
  close_bucket();

  const Tensor& first = parameters_.front().tensor;
  const auto total = static_cast<std::int64_t>(offset);
  if (sharded_) {
    // The parameters move first: only one extra copy of them is alive at any time.
    flat_parameters_ = Tensor::zeros({total}, first.dtype(), first.device());
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      Tensor& tensor = parameters_[i].tensor;
      tensor.move_storage_to(flat_parameters_.flat_view(offset_of_[i], tensor.shape()));
    }
  }
  // What was freed so far (the master weights the model was sharded from, and sharded, the
  // parameters' former storage) goes back to the system, not to the allocator's cache, before
  // the gradient buffer and the optimizer's states are made: at tp > 1 the whole vocabulary's
  // table is larger than anything the steps allocate, so the cache would keep it for nothing.
  kernels::release_cached_blocks();
  flat_ = Tensor::zeros({total}, first.dtype(), first.device());
  for (const auto& [begin, end] : bounds) {
    Bucket bucket;
    bucket.start = begin;
    bucket.buffer = kernels::Buffer::view(flat_.buffer(), begin, end - begin);
    // Sharded, the pieces reduce-scatter ranges of the blocks (every rank's range within its
    // own block); otherwise they all-reduce ranges of the bucket.
    const std::size_t span = sharded_ ? bucket.buffer.numel() / replicas : bucket.buffer.numel();
    const std::size_t piece =
        sharded_ ? std::max<std::size_t>(
                       1, std::min(kPieceElements / replicas, dp_.max_message_elements()))
                 : kPieceElements;
    for (std::size_t at = 0; at < span; at += piece)
      bucket.pieces.push_back({buckets_.size(), at, std::min(piece, span - at)});
    buckets_.push_back(std::move(bucket));
  }
  // Sharded, DP rank r owns block r of each bucket (the fault: the next rank's block).
  const std::size_t block_index =
      (static_cast<std::size_t>(dp_.rank()) +
       (fault_active(Fault::distributed_optimizer_wrong_shard) ? 1 : 0)) %
      replicas;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Tensor& tensor = parameters_[i].tensor;
    views_[i] = flat_.flat_view(offset_of_[i], tensor.shape());
    take_back(i);
    owned_[i] = {0, tensor.numel()};
    Bucket& bucket = buckets_[bucket_of_[i]];
    // Only the parameters that get a hook (below) are waited for: a frozen one never reports.
    if (tensor.requires_grad()) ++bucket.parameters;
    if (!sharded_) continue;
    const auto block = static_cast<std::int64_t>(bucket.buffer.numel() / replicas);
    const auto block_start =
        static_cast<std::int64_t>(bucket.start) + static_cast<std::int64_t>(block_index) * block;
    owned_[i] = {std::clamp<std::int64_t>(block_start - offset_of_[i], 0, tensor.numel()),
                 std::clamp<std::int64_t>(block_start + block - offset_of_[i], 0, tensor.numel())};
  }
  if (dp_.size() == 1) return;  // one replica: its gradients are the average
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (parameters_[i].tensor.requires_grad()) {
      parameters_[i].tensor.set_post_accumulate_hook([this, i] { on_gradient(i); });
    }
  }
  reset_counts();
}

DataParallelGradients::~DataParallelGradients() {
  if (dp_.size() == 1) return;
  for (Parameter& p : parameters_) {
    if (p.tensor.requires_grad()) p.tensor.set_post_accumulate_hook({});
  }
}

void DataParallelGradients::reset_counts() {
  drain();
  std::fill(passes_seen_.begin(), passes_seen_.end(), 0);
  for (Bucket& bucket : buckets_) {
    bucket.started = false;
    bucket.waiting = bucket.parameters;
  }
}

void DataParallelGradients::zero() {
  reset_counts();
  kernels::fill(flat_.buffer(), 0.0);
  for (std::size_t i = 0; i < parameters_.size(); ++i)
    parameters_[i].tensor.set_grad(views_[i]);
}

void DataParallelGradients::take_back(std::size_t parameter) {
  Tensor& tensor = parameters_[parameter].tensor;
  Tensor& view = views_[parameter];
  const Tensor grad = tensor.grad();
  if (grad.defined() && grad.buffer().data() == view.buffer().data()) return;
  if (grad.defined()) {
    kernels::copy(grad.buffer(), view.buffer());
  } else {
    kernels::fill(view.buffer(), 0.0);
  }
  tensor.set_grad(view);
}

void DataParallelGradients::set_backward_passes(int passes) {
  if (passes < 1) {
    throw std::invalid_argument(
        fmt::format("DataParallelGradients: backward passes must be >= 1, got {}", passes));
  }
  backward_passes_ = passes;
}

void DataParallelGradients::start(Bucket& bucket) {
  bucket.started = true;
  for (Piece& piece : bucket.pieces)
    queued_.push_back(&piece);
  pump();
}

void DataParallelGradients::pump() {
  // Lets MPI move the transfers along; a completed piece is finished (scaled) and its slot freed.
  for (comm::PendingReduction& slot : in_flight_) {
    if (slot.active() && slot.test()) slot.wait();
  }
  const comm::ReduceOp op =
      fault_active(Fault::dp_sum_not_average) ? comm::ReduceOp::sum : comm::ReduceOp::avg;
  const auto replicas = static_cast<std::size_t>(dp_.size());
  for (comm::PendingReduction& slot : in_flight_) {
    if (next_piece_ == queued_.size()) break;
    if (slot.active()) continue;
    const Piece& piece = *queued_[next_piece_++];
    kernels::Buffer& bucket = buckets_[piece.bucket].buffer;
    if (sharded_) {
      slot.start_reduce_scatter(dp_, bucket, bucket.numel() / replicas, piece.offset, piece.count,
                                op, wire_);
    } else {
      kernels::Buffer range = kernels::Buffer::view(bucket, piece.offset, piece.count);
      slot.start_all_reduce(dp_, range, op, wire_);
    }
  }
}

void DataParallelGradients::drain() {
  pump();
  while (std::any_of(in_flight_.begin(), in_flight_.end(),
                     [](const comm::PendingReduction& slot) { return slot.active(); })) {
    for (comm::PendingReduction& slot : in_flight_)
      slot.wait();
    pump();
  }
  queued_.clear();
  next_piece_ = 0;
}

void DataParallelGradients::on_gradient(std::size_t parameter) {
  Bucket& bucket = buckets_[bucket_of_[parameter]];
  if (bucket.started) {
    throw std::logic_error(fmt::format(
        "DataParallelGradients: the gradient of {} grew after its bucket's all-reduce started "
        "(more than the {} backward passes per step set, or a parameter used by two "
        "autograd::recompute regions, which get their gradients in separate inner passes)",
        parameters_[parameter].name, backward_passes_));
  }
  take_back(parameter);
  if (++passes_seen_[parameter] == backward_passes_ && --bucket.waiting == 0) {
    start(bucket);
  } else {
    pump();
  }
}

std::size_t DataParallelGradients::buckets_started() const {
  return static_cast<std::size_t>(
      std::count_if(buckets_.begin(), buckets_.end(), [](const Bucket& b) { return b.started; }));
}

void DataParallelGradients::finish() {
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    if (!buckets_[bucket_of_[i]].started) take_back(i);
  }
  if (dp_.size() == 1) return;
  for (Bucket& bucket : buckets_) {
    if (!bucket.started) start(bucket);
  }
  reset_counts();  // drains the queue first
}

void DataParallelGradients::all_gather_buckets(Tensor& flat, comm::Wire wire) {
  // Piece by piece: range [at, at + count) of every rank's block is packed into one buffer of
  // count x dp elements, so the temporaries stay at 2^18 elements whatever the bucket's size.
  // On a bfloat16 wire the packed pieces are rounded to bfloat16 and widened back on arrival.
  const auto replicas = static_cast<std::size_t>(dp_.size());
  const auto rank = static_cast<std::size_t>(dp_.rank());
  const std::size_t element_bytes = kernels::dtype_size(flat.dtype());
  const kernels::DType sent = wire == comm::Wire::bf16 ? kernels::DType::bf16 : flat.dtype();
  for (const Bucket& bucket : buckets_) {
    const std::size_t block = bucket.buffer.numel() / replicas;
    for (const Piece& piece : bucket.pieces) {
      const auto at = [&](std::size_t r) { return bucket.start + r * block + piece.offset; };
      const auto place = [&](std::size_t r) {
        return kernels::Buffer::view(flat.buffer(), at(r), piece.count);
      };
      kernels::Buffer mine(piece.count, sent, flat.device());
      kernels::Buffer all(piece.count * replicas, sent, flat.device());
      if (sent == flat.dtype()) {
        kernels::copy_bytes(flat.buffer(), at(rank) * element_bytes, mine, 0, mine.bytes());
      } else {
        kernels::convert(place(rank), mine);
      }
      comm::all_gather(dp_, mine, all, 1);
      for (std::size_t r = 0; r < replicas; ++r) {
        kernels::Buffer into = place(r);
        const kernels::Buffer from = kernels::Buffer::view(all, r * piece.count, piece.count);
        if (sent == flat.dtype()) {
          kernels::copy(from, into);
        } else {
          kernels::convert(from, into);
        }
      }
    }
  }
}

void DataParallelGradients::all_gather_parameters(comm::Wire wire) {
  if (!sharded_ || fault_active(Fault::distributed_optimizer_no_all_gather)) return;
  if (wire == comm::Wire::bf16 && flat_parameters_.dtype() != kernels::DType::f32) {
    throw std::invalid_argument(
        fmt::format("all_gather_parameters: a bfloat16 wire for {} parameters",
                    kernels::to_string(flat_parameters_.dtype())));
  }
  all_gather_buckets(flat_parameters_, wire);
}

std::vector<Tensor> DataParallelGradients::all_gather_shards(const std::vector<Tensor>& shards) {
  if (shards.size() != parameters_.size()) {
    throw std::invalid_argument(fmt::format("all_gather_shards: {} shards for {} parameters",
                                            shards.size(), parameters_.size()));
  }
  Tensor flat = sharded_ ? Tensor::zeros(flat_.shape(), flat_.dtype(), flat_.device()) : Tensor();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    if (shards[i].numel() != owned_[i].size()) {
      throw std::invalid_argument(fmt::format("all_gather_shards: {} has {} elements, not {}",
                                              parameters_[i].name, shards[i].numel(),
                                              owned_[i].size()));
    }
    if (!sharded_) continue;
    kernels::Buffer place = kernels::Buffer::view(
        flat.buffer(), static_cast<std::size_t>(offset_of_[i] + owned_[i].begin),
        static_cast<std::size_t>(owned_[i].size()));
    kernels::copy(shards[i].buffer(), place);
  }
  std::vector<Tensor> full;
  if (sharded_) all_gather_buckets(flat, comm::Wire::native);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const Shape& shape = parameters_[i].tensor.shape();
    full.push_back(sharded_ ? flat.flat_view(offset_of_[i], shape) : shards[i].flat_view(0, shape));
  }
  return full;
}

}  // namespace mpitron::nn
