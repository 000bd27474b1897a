// The differentiable ops of a transformer language model beyond linear algebra: layer_norm,
// embedding (whole table or a vocabulary slice) and cross_entropy.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <utility>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::needs_grad;

namespace {

// Throws unless `indices` is an int32/int64 tensor on `like`'s device.
void check_indices(const char* op, const char* name, const Tensor& indices, const Tensor& like) {
  if (kernels::is_floating(indices.dtype()) || indices.device() != like.device()) {
    throw std::invalid_argument(fmt::format("{}: {} must be int32 or int64 on {}, got {} on {}", op,
                                            name, kernels::to_string(like.device()),
                                            kernels::to_string(indices.dtype()),
                                            kernels::to_string(indices.device())));
  }
  if (!kernels::is_floating(like.dtype())) {
    throw std::invalid_argument(fmt::format("{}: {} must be float32 or float64, got {}", op,
                                            to_string(like.shape()),
                                            kernels::to_string(like.dtype())));
  }
}

// What an index tensor holds, read on the host: the first (row-major) position whose value is
// outside [0, limit) and is not `skipped`, with the value, and the count of values that are not
// `skipped`.
struct IndexScan {
  std::optional<std::pair<std::size_t, std::int64_t>> outside;
  std::size_t counted = 0;
};

IndexScan scan_indices(const Tensor& indices, std::int64_t limit,
                       std::optional<std::int64_t> skipped = std::nullopt) {
  const kernels::Buffer host = indices.buffer().to(kernels::Device::cpu);
  return kernels::dispatch_index(host.dtype(), [&]<class I>(I) {
    IndexScan scan;
    const I* values = host.data_as<I>();
    for (std::size_t i = 0; i < host.numel(); ++i) {
      const auto value = static_cast<std::int64_t>(values[i]);
      if (value == skipped) continue;
      ++scan.counted;
      if ((value < 0 || value >= limit) && !scan.outside) scan.outside = std::pair{i, value};
    }
    return scan;
  });
}

void check_weight_2d(const char* op, const Tensor& weight) {
  if (weight.ndim() != 2) {
    throw std::invalid_argument(
        fmt::format("{}: weight {} must be [rows, embedding_dim]", op, to_string(weight.shape())));
  }
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_compatible("layer_norm", {x, weight, bias});
  for (const auto& [name, param] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}}) {
    if (param->ndim() != 1 || x.ndim() < 1 || param->size(0) != x.size(-1)) {
      throw std::invalid_argument(
          fmt::format("layer_norm: {} {} does not match the last dim of x {}", name,
                      to_string(param->shape()), to_string(x.shape())));
    }
  }
  const auto cols = static_cast<std::size_t>(x.size(-1));
  const auto rows = static_cast<std::int64_t>(cols == 0 ? 0 : x.numel() / x.size(-1));
  // Backward starts from xhat as kept (bfloat16 under --bf16: 2^-9 relative per element), which
  // the kernel writes rounded beside y: the bits keep_activation would round it to, without a
  // float32 xhat and a pass over it.
  const bool keep = grad_enabled();
  Tensor y = empty_like(x), rstd = empty_like(x, {rows});
  Tensor xhat =
      Tensor::empty(x.shape(), keep && detail::keeps_bf16(x) ? DType::bf16 : x.dtype(), x.device());
  kernels::layer_norm_forward(x.buffer(), weight.buffer(), bias.buffer(), cols, eps, y.buffer(),
                              xhat.buffer(), rstd.buffer());
  const Tensor kept_xhat = keep ? xhat : Tensor();
  const bool x_grad = needs_grad(x);
  return detail::record(
      "layer_norm", y, {x, weight, bias},
      [kept_xhat, x_grad, weight, bias, rstd, cols](const Tensor& dy) {
        // The kernel widens a bfloat16 kept xhat element by element: no float32 copy.
        Tensor dx = empty_like(dy), dweight = empty_like(weight), dbias = empty_like(bias);
        kernels::layer_norm_backward(kept_xhat.buffer(), weight.buffer(), rstd.buffer(),
                                     dy.buffer(), cols, dx.buffer(), dweight.buffer(),
                                     dbias.buffer());
        return std::vector<Tensor>{x_grad ? dx : Tensor(), needs_grad(weight) ? dweight : Tensor(),
                                   needs_grad(bias) ? dbias : Tensor()};
      });
}

Tensor embedding_slice(const Tensor& weight, const Tensor& indices, std::int64_t first_row) {
  check_weight_2d("embedding_slice", weight);
  check_indices("embedding_slice", "indices", indices, weight);
  const auto cols = static_cast<std::size_t>(weight.size(1));
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = empty_like(weight, out_shape);
  kernels::embedding_forward(weight.buffer(), cols, indices.buffer(), first_row, out.buffer());
  const Tensor saved = indices.detach();
  return detail::record(
      "embedding", out, {weight}, [saved, first_row, cols, weight](const Tensor& dout) {
        // The rows go straight into a gradient the table already has (a tied embedding's, which the
        // LM head's GEMM has just added to): no dense zeroed [rows, cols] tensor to add afterwards.
        const Tensor existing = detail::existing_leaf_grad(weight);
        Tensor dweight = existing.defined()
                             ? existing
                             : Tensor::zeros(weight.shape(), dout.dtype(), dout.device());
        kernels::embedding_backward(dout.buffer(), saved.buffer(), first_row, cols,
                                    dweight.buffer());
        return std::vector<Tensor>{existing.defined() ? Tensor() : dweight};
      });
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_weight_2d("embedding", weight);
  check_indices("embedding", "indices", indices, weight);
  if (const auto bad = scan_indices(indices, weight.size(0)).outside) {
    throw std::invalid_argument(
        fmt::format("embedding: index {} at position {} of indices {} is outside [0, {})",
                    bad->second, bad->first, to_string(indices.shape()), weight.size(0)));
  }
  return embedding_slice(weight, indices, 0);
}

double cross_entropy_divisor(const char* op, const Tensor& targets, std::int64_t vocab,
                             double divisor) {
  if (!(divisor >= 0.0 && std::isfinite(divisor))) {
    throw std::invalid_argument(fmt::format(
        "{}: divisor must be a finite number >= 0 (0: the count of targets not ignored), got {}",
        op, divisor));
  }
  if (targets.dtype() != kernels::DType::i32 && targets.dtype() != kernels::DType::i64) {
    throw std::invalid_argument(fmt::format("{}: targets must be int32 or int64, got {}", op,
                                            kernels::to_string(targets.dtype())));
  }
  const IndexScan scan = scan_indices(targets, vocab, kernels::kIgnoreTarget);
  if (scan.outside) {
    throw std::invalid_argument(
        fmt::format("{}: target {} at position {} of targets {} is outside [0, {})", op,
                    scan.outside->second, scan.outside->first, to_string(targets.shape()), vocab));
  }
  return divisor > 0.0 ? divisor : static_cast<double>(scan.counted);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, double divisor) {
  check_indices("cross_entropy", "targets", targets, logits);
  Shape leading = logits.shape();
  if (!leading.empty()) leading.pop_back();
  if (logits.ndim() < 1 || targets.shape() != leading || logits.size(-1) < 1) {
    throw std::invalid_argument(
        fmt::format("cross_entropy: targets {} do not match the leading dims of logits {}",
                    to_string(targets.shape()), to_string(logits.shape())));
  }
  const std::int64_t vocab = logits.size(-1);
  const double used_divisor = cross_entropy_divisor("cross_entropy", targets, vocab, divisor);
  const auto cols = static_cast<std::size_t>(vocab);
  const std::int64_t rows = targets.numel();
  Tensor row_max = empty_like(logits, {rows}), sum_exp = empty_like(logits, {rows});
  Tensor target_logit = empty_like(logits, {rows}), loss = empty_like(logits, {});
  kernels::row_max(logits.buffer(), cols, cols, row_max.buffer());
  kernels::cross_entropy_stats(logits.buffer(), cols, cols, targets.buffer(), 0, row_max.buffer(),
                               sum_exp.buffer(), target_logit.buffer());
  kernels::cross_entropy_loss(row_max.buffer(), sum_exp.buffer(), target_logit.buffer(),
                              targets.buffer(), used_divisor, loss.buffer());
  const Tensor saved_targets = targets.detach();
  return detail::record(
      "cross_entropy", loss, {logits},
      [logits, saved_targets, row_max, sum_exp, cols, used_divisor](const Tensor& dloss) {
        // The logits' last reader: the gradient overwrites them unless another tensor holds them.
        Tensor dlogits = storage_is_exclusive(logits) ? logits.detach() : empty_like(logits);
        kernels::cross_entropy_backward(logits.buffer(), cols, cols, saved_targets.buffer(), 0,
                                        row_max.buffer(), sum_exp.buffer(), dloss.buffer(),
                                        used_divisor, dlogits.buffer());
        return std::vector<Tensor>{dlogits};
      });
}

}  // namespace mpitron::autograd
