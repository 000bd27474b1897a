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

// Rows [first, first + n) of a buffer of [rows, cols] elements (cols 1: per-row values), as a
// view.
kernels::Buffer row_view(kernels::Buffer& rows, std::size_t first, std::size_t n,
                         std::size_t cols) {
  return kernels::Buffer::view(rows, first * cols, n * cols);
}

// Runs body(first, n, rows) over the logits [rows, cols] as float32 or float64 row chunks: the
// logits' own rows when they are float32 or float64 (one chunk), otherwise (bfloat16) chunks of
// widened_logits_rows(rows, cols) rows widened, exactly, into one float32 scratch.
template <class Body>
void for_each_float_rows(Tensor logits, std::size_t cols, Body body) {
  const std::size_t rows = cols == 0 ? 0 : static_cast<std::size_t>(logits.numel()) / cols;
  if (logits.dtype() != autograd::DType::bf16) {
    body(std::size_t{0}, rows, logits.buffer());
    return;
  }
  const std::size_t chunk = widened_logits_rows(rows, cols);
  kernels::Buffer scratch(chunk * cols, autograd::DType::f32, logits.device());
  for (std::size_t first = 0; first < rows; first += chunk) {
    const std::size_t n = std::min(chunk, rows - first);
    kernels::Buffer widened = row_view(scratch, 0, n, cols);
    kernels::convert(row_view(logits.buffer(), first, n, cols), widened);
    body(first, n, widened);
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
    // The logits' last reader: the gradient overwrites them unless another tensor still holds
    // them, so [rows, Vp/tp] is held once, not twice, from here to the head's backward.
    Tensor dlogits = autograd::storage_is_exclusive(logits_)
                         ? logits_.detach()
                         : Tensor::empty(logits_.shape(), logits_.dtype(), logits_.device());
    const auto cols = static_cast<std::size_t>(logits_.size(-1));
    const bool widened = logits_.dtype() == autograd::DType::bf16;
    for_each_float_rows(
        logits_, cols, [&](std::size_t first, std::size_t n, kernels::Buffer& rows) {
          kernels::Buffer out =
              widened ? row_view(rows, 0, n, cols) : row_view(dlogits.buffer(), first, n, cols);
          kernels::cross_entropy_backward(
              rows, cols, used_cols_, row_view(targets_.buffer(), first, n, 1), first_col_,
              row_view(row_max_, first, n, 1), row_view(sum_exp_, first, n, 1),
              grad_output.buffer(), divisor_, out);
          if (widened) {
            kernels::Buffer dst = row_view(dlogits.buffer(), first, n, cols);
            kernels::convert(out, dst);
          }
        });
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

Tensor VocabParallelEmbedding::logits(const Tensor& x, bool sequence_parallel, bool bf16) const {
  const Tensor input = enter_tp_region(x, tp_, sequence_parallel);
  return bf16 ? autograd::linear_bf16_output(input, weight_) : autograd::linear(input, weight_);
}

std::size_t widened_logits_rows(std::size_t rows, std::size_t cols) {
  const std::size_t fit = kWidenedLogitsBytes / (std::max<std::size_t>(cols, 1) * sizeof(float));
  return std::clamp<std::size_t>(std::min(fit, (rows + 7) / 8), 1, std::max<std::size_t>(rows, 1));
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
  // bfloat16 logits (a --bf16 run's head) are read widened, and their statistics are float32.
  const autograd::DType stats =
      logits.dtype() == autograd::DType::bf16 ? autograd::DType::f32 : logits.dtype();
  const auto buffer = [&](std::size_t n) { return kernels::Buffer(n, stats, logits.device()); };
  kernels::Buffer row_max = buffer(rows), sum_exp = buffer(rows), target_logit = buffer(rows);
  const auto row_cols = static_cast<std::size_t>(cols);
  Tensor ids = targets;
  for_each_float_rows(logits, row_cols,
                      [&](std::size_t first, std::size_t n, kernels::Buffer& chunk) {
                        kernels::Buffer max_rows = row_view(row_max, first, n, 1);
                        kernels::row_max(chunk, row_cols, used_cols, max_rows);
                      });
  if (!fault_active(Fault::vocab_ce_local_max)) comm::all_reduce(tp, row_max, comm::ReduceOp::max);
  for_each_float_rows(
      logits, row_cols, [&](std::size_t first, std::size_t n, kernels::Buffer& chunk) {
        kernels::Buffer sum_rows = row_view(sum_exp, first, n, 1);
        kernels::Buffer target_rows = row_view(target_logit, first, n, 1);
        kernels::cross_entropy_stats(chunk, row_cols, used_cols,
                                     row_view(ids.buffer(), first, n, 1), first_col,
                                     row_view(row_max, first, n, 1), sum_rows, target_rows);
      });
  comm::all_reduce(tp, sum_exp, comm::ReduceOp::sum);
  comm::all_reduce(tp, target_logit, comm::ReduceOp::sum);
  Tensor loss = Tensor::empty({}, stats, logits.device());
  kernels::cross_entropy_loss(row_max, sum_exp, target_logit, targets.buffer(), used_divisor,
                              loss.buffer());
  return autograd::attach(loss,
                          std::make_shared<VocabParallelCrossEntropy>(
                              logits.detach(), targets, first_col, used_cols, used_divisor,
                              std::move(row_max), std::move(sum_exp)),
                          {logits});
}

}  // namespace mpitron::nn
