#include "nn/layers/attention.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"
#include "nn/layers/tp_mappings.h"

namespace mpitron::nn {

namespace {

void check_embed(std::int64_t embed) {
  if (embed < 1) throw std::invalid_argument(fmt::format("--embed must be >= 1, got {}", embed));
}

// A tensor of `shape` holding index + offset (computed in double, then rounded to dtype).
Tensor arange_plus(const Shape& shape, double offset, DType dtype, Device device) {
  std::vector<double> values(static_cast<std::size_t>(autograd::numel_of(shape)));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<double>(i) + offset;
  return Tensor::from_vector(values, shape, dtype, device);
}

Parameters named(const Parameters& q, const Parameters& k, const Parameters& v,
                 const Parameters& out) {
  Parameters all;
  append_parameters(all, "q", q);
  append_parameters(all, "k", k);
  append_parameters(all, "v", v);
  append_parameters(all, "out", out);
  return all;
}

// heads / tp after checking the sizes; throws std::invalid_argument with the size error.
std::int64_t heads_per_rank(std::int64_t embed, std::int64_t heads, int tp) {
  if (const auto error = attention_size_error(embed, heads, tp)) {
    throw std::invalid_argument(*error);
  }
  return heads / tp;
}

// kv_heads / tp after checking that kv_heads divides heads and tp divides kv_heads.
std::int64_t kv_heads_per_rank(const AttentionHeads& h, int tp) {
  if (h.kv_heads < 1 || h.heads % h.kv_heads != 0 || h.kv_heads % tp != 0) {
    throw std::invalid_argument(
        fmt::format("attention: kv heads {} must divide heads {} and be divisible by tp {}",
                    h.kv_heads, h.heads, tp));
  }
  return h.kv_heads / tp;
}

}  // namespace

namespace {

// rotary_heads of x [batch, seq, heads head_dim] from global position `first_position`.
Tensor rotary_heads_from(const Tensor& x, std::int64_t heads, const kernels::RopeFrequencies& rope,
                         std::int64_t first_position) {
  const Shape shape = x.shape();
  const Tensor per_head = autograd::reshape(x, {shape[0], shape[1], heads, shape[2] / heads});
  return autograd::reshape(autograd::rotary_embedding(per_head, rope, first_position), shape);
}

}  // namespace

Tensor rotary_heads(const Tensor& x, std::int64_t heads, const kernels::RopeFrequencies& rope,
                    const ContextParallel& cp) {
  if (cp.size() == 1) return rotary_heads_from(x, heads, rope, 0);
  const std::int64_t chunk = x.size(1) / 2;
  const std::int64_t last_chunk = 2 * cp.size() - 1 - cp.rank();
  return autograd::concat(
      {rotary_heads_from(autograd::narrow(x, 1, 0, chunk), heads, rope, cp.rank() * chunk),
       rotary_heads_from(autograd::narrow(x, 1, chunk, chunk), heads, rope, last_chunk * chunk)},
      1);
}

Tensor repeat_kv_heads(const Tensor& x, std::int64_t kv_heads, std::int64_t group) {
  if (group == 1) return x;
  const Shape shape = x.shape();
  const std::int64_t head_dim = shape[2] / kv_heads;
  const Tensor per_head = autograd::reshape(x, {shape[0], shape[1], kv_heads, head_dim});
  const Tensor copies = autograd::concat(std::vector<Tensor>(group, per_head), 3);
  return autograd::reshape(copies, {shape[0], shape[1], shape[2] * group});
}

AttentionWeights make_attention_weights_normal(std::int64_t embed, std::uint64_t seed, DType dtype,
                                               Device device) {
  check_embed(embed);
  const double std = 1.0 / std::sqrt(static_cast<double>(embed));
  LinearWeights layers[4];
  for (std::uint64_t i = 0; i < 4; ++i) {
    layers[i] = {autograd::randn({embed, embed}, seed + i, std, dtype, device),
                 autograd::randn({embed}, seed + 100 + i, 0.1, dtype, device)};
  }
  return {layers[0], layers[1], layers[2], layers[3]};
}

AttentionWeights make_attention_weights_arange(std::int64_t embed, DType dtype, Device device) {
  check_embed(embed);
  const auto layer = [&](double offset) {
    return LinearWeights{arange_plus({embed, embed}, offset, dtype, device),
                         arange_plus({embed}, offset, dtype, device)};
  };
  return {layer(0.1), layer(-0.2), layer(0.3), layer(-0.4)};
}

std::optional<std::string> attention_size_error(std::int64_t embed, std::int64_t heads, int tp) {
  if (embed < 1) return fmt::format("--embed must be >= 1, got {}", embed);
  if (heads < 1) return fmt::format("--heads must be >= 1, got {}", heads);
  if (tp < 1) return fmt::format("tp must be >= 1, got {}", tp);
  if (heads % tp != 0) return fmt::format("--heads {} is not divisible by tp {}", heads, tp);
  if (embed % heads != 0) {
    return fmt::format("--embed {} is not divisible by --heads {}", embed, heads);
  }
  return std::nullopt;
}

namespace {

// The core of both attention forms: q, k, v [batch, seq, heads*head_dim] split into heads
// [batch, heads, seq, head_dim], `attend` (per-head q, k, v and the scale -> per-head context)
// applied, and the heads put back as [batch, seq, heads*head_dim].
template <class Attend>
Tensor attention_over_heads(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                            std::int64_t heads, Attend attend) {
  autograd::check_same_shape(op, q, k);
  autograd::check_same_shape(op, q, v);
  if (q.ndim() != 3 || heads < 1 || q.size(2) % heads != 0) {
    throw std::invalid_argument(
        fmt::format("{}: q {} is not [batch, seq, width] with width divisible by {} heads", op,
                    autograd::to_string(q.shape()), heads));
  }
  const std::int64_t batch = q.size(0), seq = q.size(1), width = q.size(2);
  const std::int64_t head_dim = width / heads;
  const auto per_head = [&](const Tensor& t) {
    return autograd::transpose(autograd::reshape(t, {batch, seq, heads, head_dim}), 1, 2);
  };
  const double scale = fault_active(Fault::attention_scale_head_dim)
                           ? 1.0 / static_cast<double>(head_dim)
                           : 1.0 / std::sqrt(static_cast<double>(head_dim));
  const Tensor context = attend(per_head(q), per_head(k), per_head(v), scale);
  return autograd::reshape(autograd::transpose(context, 1, 2), {batch, seq, width});
}

}  // namespace

Tensor multi_head_attention_core(const Tensor& q, const Tensor& k, const Tensor& v,
                                 std::int64_t heads, bool causal) {
  return attention_over_heads(
      "multi_head_attention_core", q, k, v, heads,
      [causal](const Tensor& qh, const Tensor& kh, const Tensor& vh, double scale) {
        return autograd::scaled_dot_product_attention(qh, kh, vh, causal, scale);
      });
}

Tensor context_parallel_attention_core(const Tensor& q, const Tensor& k, const Tensor& v,
                                       std::int64_t heads, const ContextParallel& cp) {
  if (cp.size() == 1) return multi_head_attention_core(q, k, v, heads, /*causal=*/true);
  // Ring attention keeps float32 storage; under bfloat16 operands (train --bf16) it reads q, k
  // and v as bfloat16, as scaled_dot_product_attention does.
  const auto read = [](const Tensor& x) {
    const bool bf16 = kernels::gemm_operands() == kernels::GemmOperands::bfloat16 &&
                      x.dtype() == autograd::DType::f32;
    return bf16 ? autograd::read_as_bf16(x) : x;
  };
  return attention_over_heads(
      "context_parallel_attention_core", read(q), read(k), read(v), heads,
      [&cp](const Tensor& qh, const Tensor& kh, const Tensor& vh, double scale) {
        return context_parallel_attention(qh, kh, vh, cp.group, cp.how, scale, cp.prefetch);
      });
}

Tensor unfused_attention_core(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads,
                              bool causal) {
  return attention_over_heads(
      "unfused_attention_core", q, k, v, heads,
      [causal](const Tensor& qh, const Tensor& kh, const Tensor& vh, double scale) {
        return autograd::matmul(
            autograd::softmax(autograd::matmul(qh, kh, false, true), causal, scale), vh);
      });
}

MultiHeadAttention::MultiHeadAttention(const AttentionWeights& weights, std::int64_t heads,
                                       bool causal)
    : heads_(heads_per_rank(weights.q.weight.size(0), heads, 1)),
      causal_(causal),
      q_(weights.q),
      k_(weights.k),
      v_(weights.v),
      out_(weights.out) {}

Tensor MultiHeadAttention::forward(const Tensor& x) const {
  return out_.forward(
      unfused_attention_core(q_.forward(x), k_.forward(x), v_.forward(x), heads_, causal_));
}

Parameters MultiHeadAttention::parameters() const {
  return named(q_.parameters(), k_.parameters(), v_.parameters(), out_.parameters());
}

ParallelMultiHeadAttention::ParallelMultiHeadAttention(const AttentionWeights& master,
                                                       AttentionHeads heads,
                                                       const comm::Communicator& tp, bool causal,
                                                       bool sequence_parallel, ContextParallel cp)
    : tp_(tp),
      local_heads_(heads_per_rank(master.q.weight.size(0), heads.heads, tp.size())),
      local_kv_heads_(kv_heads_per_rank(heads, tp.size())),
      rope_(heads.rope),
      causal_(causal),
      sequence_parallel_(sequence_parallel),
      cp_(std::move(cp)),
      q_(master.q, tp, /*gather_output=*/false),
      k_(master.k, tp, /*gather_output=*/false),
      v_(master.v, tp, /*gather_output=*/false),
      out_(master.out, tp, /*input_is_parallel=*/true, sequence_parallel) {
  if (cp_.size() > 1 && !causal) {
    throw std::invalid_argument("attention: context parallelism needs the causal mask");
  }
}

Tensor ParallelMultiHeadAttention::forward(const Tensor& x) const {
  const Tensor input = enter_tp_region(x, tp_, sequence_parallel_);
  // q, k and v multiply (and keep for backward) one copy of their input's GEMM operand.
  const Tensor operand = autograd::gemm_operand(input);
  const auto project = [&input, &operand](const ColumnParallelLinear& layer) {
    return autograd::linear(input, layer.weight(), layer.bias(), operand);
  };
  Tensor q = project(q_), k = project(k_), v = project(v_);
  if (rope_.theta > 0.0) {
    q = rotary_heads(q, local_heads_, rope_, cp_);
    k = rotary_heads(k, local_kv_heads_, rope_, cp_);
  }
  const std::int64_t group = local_heads_ / local_kv_heads_;
  k = repeat_kv_heads(k, local_kv_heads_, group);
  v = repeat_kv_heads(v, local_kv_heads_, group);
  const Tensor context = cp_.size() > 1
                             ? context_parallel_attention_core(q, k, v, local_heads_, cp_)
                             : multi_head_attention_core(q, k, v, local_heads_, causal_);
  return out_.forward(context);
}

Parameters ParallelMultiHeadAttention::parameters() const {
  return named(q_.parameters(), k_.parameters(), v_.parameters(), out_.parameters());
}

}  // namespace mpitron::nn
