#include "nn/layers/vocab_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"
#include "nn/layers/tp_mappings.h"

namespace mpitron::nn {

namespace {

// Throws naming the first token id outside [0, vocab).
void check_ids(const char* op, const Tensor& ids, std::int64_t vocab) {
  const std::vector<double> values = ids.to_vector();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= static_cast<double>(vocab)) {
      throw std::invalid_argument(fmt::format("{}: token id {} at position {} is outside [0, {})",
                                              op, static_cast<std::int64_t>(values[i]), i, vocab));
    }
  }
}

class VocabParallelCrossEntropy final : public autograd::Function {
 public:
  VocabParallelCrossEntropy(Tensor logits, Tensor targets, std::int64_t first_col,
                            std::size_t used_cols, double divisor, kernels::Buffer row_max,
                            kernels::Buffer sum_exp)
      : logits_(std::move(logits)),
        targets_(std::move(targets)),
        first_col_(first_col),
        used_cols_(used_cols),
        divisor_(divisor),
        row_max_(std::move(row_max)),
        sum_exp_(std::move(sum_exp)) {}
  std::string name() const override { return "vocab_parallel_cross_entropy"; }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor dlogits = Tensor::empty(logits_.shape(), logits_.dtype(), logits_.device());
    kernels::cross_entropy_backward(logits_.buffer(), static_cast<std::size_t>(logits_.size(-1)),
                                    used_cols_, targets_.buffer(), first_col_, row_max_, sum_exp_,
                                    grad_output.buffer(), divisor_, dlogits.buffer());
    return {dlogits};
  }
  void release_saved() override {
    logits_ = Tensor();
    targets_ = Tensor();
    row_max_ = kernels::Buffer();
    sum_exp_ = kernels::Buffer();
  }

 private:
  Tensor logits_, targets_;
  std::int64_t first_col_;
  std::size_t used_cols_;
  double divisor_;
  kernels::Buffer row_max_, sum_exp_;
};

}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(const Tensor& master, std::int64_t vocab,
                                               const comm::Communicator& tp)
    : tp_(tp),
      vocab_(vocab),
      first_row_(master.size(0) / tp.size() * tp.rank()),
      weight_(shard(master, 0, tp.rank(), tp.size(), "VocabParallelEmbedding vocab")) {
  if (vocab < 1 || vocab > master.size(0)) {
    throw std::invalid_argument(
        fmt::format("VocabParallelEmbedding: vocab {} is outside [1, {}], the table's rows", vocab,
                    master.size(0)));
  }
}

Tensor VocabParallelEmbedding::forward(const Tensor& tokens) const {
  check_ids("embedding", tokens, vocab_);
  return reduce_from_tp(autograd::embedding_slice(weight_, tokens, first_row_), tp_);
}

Tensor VocabParallelEmbedding::logits(const Tensor& x, bool sequence_parallel) const {
  return autograd::linear(enter_tp_region(x, tp_, sequence_parallel), weight_);
}

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab,
                                    const comm::Communicator& tp, double divisor) {
  const std::int64_t cols = logits.size(-1);
  if (targets.numel() * cols != logits.numel()) {
    throw std::invalid_argument(
        fmt::format("vocab_parallel_cross_entropy: logits {} do not match targets {}",
                    autograd::to_string(logits.shape()), autograd::to_string(targets.shape())));
  }
  if (vocab < 1 || vocab > cols * tp.size()) {
    throw std::invalid_argument(fmt::format(
        "vocab_parallel_cross_entropy: vocab {} is outside [1, {}], the logits' columns", vocab,
        cols * tp.size()));
  }
  const double used_divisor =
      autograd::cross_entropy_divisor("vocab_parallel_cross_entropy", targets, vocab, divisor);
  const auto rows = static_cast<std::size_t>(targets.numel());
  const std::int64_t first_col = cols * tp.rank();
  const auto used_cols =
      static_cast<std::size_t>(std::clamp<std::int64_t>(vocab - first_col, 0, cols));
  const auto buffer = [&](std::size_t n) {
    return kernels::Buffer(n, logits.dtype(), logits.device());
  };
  kernels::Buffer row_max = buffer(rows), sum_exp = buffer(rows), target_logit = buffer(rows);
  kernels::row_max(logits.buffer(), static_cast<std::size_t>(cols), used_cols, row_max);
  if (!fault_active(Fault::vocab_ce_local_max)) comm::all_reduce(tp, row_max, comm::ReduceOp::max);
  kernels::cross_entropy_stats(logits.buffer(), static_cast<std::size_t>(cols), used_cols,
                               targets.buffer(), first_col, row_max, sum_exp, target_logit);
  comm::all_reduce(tp, sum_exp, comm::ReduceOp::sum);
  comm::all_reduce(tp, target_logit, comm::ReduceOp::sum);
  Tensor loss = Tensor::empty({}, logits.dtype(), logits.device());
  kernels::cross_entropy_loss(row_max, sum_exp, target_logit, targets.buffer(), used_divisor,
                              loss.buffer());
  return autograd::attach(loss,
                          std::make_shared<VocabParallelCrossEntropy>(
                              logits.detach(), targets, first_col, used_cols, used_divisor,
                              std::move(row_max), std::move(sum_exp)),
                          {logits});
}

}  // namespace mpitron::nn
