#include "nn/parallel/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

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
                                             std::size_t bucket_elements)
    : dp_(dp),
      parameters_(parameters),
      views_(parameters.size()),
      bucket_of_(parameters.size()),
      passes_seen_(parameters.size(), 0) {
  if (bucket_elements == 0) {
    throw std::invalid_argument("DataParallelGradients: bucket_elements must be >= 1");
  }
  if (parameters_.empty()) return;
  check_uniform(parameters_);
  std::int64_t total = 0;
  for (const Parameter& p : parameters_)
    total += p.tensor.numel();
  const Tensor& first = parameters_.front().tensor;
  flat_ = Tensor::zeros({total}, first.dtype(), first.device());

  // Reverse order: the parameters backward finishes first lead the buffer and the first bucket.
  std::int64_t offset = 0;
  std::size_t bucket_start = 0;
  std::vector<std::size_t> members;
  const auto close_bucket = [&] {
    Bucket bucket;
    // Only the parameters that get a hook (below) are waited for: a frozen one never reports.
    bucket.parameters =
        static_cast<int>(std::count_if(members.begin(), members.end(), [&](std::size_t i) {
          return parameters_[i].tensor.requires_grad();
        }));
    bucket.buffer = kernels::Buffer::view(flat_.buffer(), bucket_start,
                                          static_cast<std::size_t>(offset) - bucket_start);
    for (std::size_t first = 0; first < bucket.buffer.numel(); first += kPieceElements) {
      bucket.pieces.push_back(kernels::Buffer::view(
          bucket.buffer, first, std::min(kPieceElements, bucket.buffer.numel() - first)));
    }
    for (const std::size_t i : members)
      bucket_of_[i] = buckets_.size();
    buckets_.push_back(std::move(bucket));
    bucket_start = static_cast<std::size_t>(offset);
    members.clear();
  };
  for (std::size_t i = parameters_.size(); i-- > 0;) {
    const Tensor& tensor = parameters_[i].tensor;
    views_[i] = flat_.flat_view(offset, tensor.shape());
    take_back(i);
    offset += tensor.numel();
    members.push_back(i);
    if (static_cast<std::size_t>(offset) - bucket_start >= bucket_elements) close_bucket();
  }
  if (!members.empty()) close_bucket();
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
  for (kernels::Buffer& piece : bucket.pieces)
    queued_.push_back(&piece);
  pump();
}

void DataParallelGradients::pump() {
  // Lets MPI move the transfers along; a completed piece is finished (scaled) and its slot freed.
  for (comm::PendingAllReduce& slot : in_flight_) {
    if (slot.active() && slot.test()) slot.wait();
  }
  const bool average = !fault_active(Fault::dp_sum_not_average);
  for (comm::PendingAllReduce& slot : in_flight_) {
    if (next_piece_ == queued_.size()) break;
    if (!slot.active()) {
      slot.start(dp_, *queued_[next_piece_++], average ? comm::ReduceOp::avg : comm::ReduceOp::sum);
    }
  }
}

void DataParallelGradients::drain() {
  pump();
  while (std::any_of(in_flight_.begin(), in_flight_.end(),
                     [](const comm::PendingAllReduce& slot) { return slot.active(); })) {
    for (comm::PendingAllReduce& slot : in_flight_)
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

}  // namespace mpitron::nn
