#include "app/validate/kernel_checks_gpt.h"

#include <cmath>
#include <cstdint>

#include "autograd/ops.h"
#include "kernels/ops.h"

namespace mpitron::app {

using autograd::Tensor;
using V = std::vector<double>;
using Ids = std::vector<std::int64_t>;

namespace {

constexpr double kLayerNormEps = 1e-5;

// LayerNorm of each row of x [rows, cols] with weight and bias [cols]: two-pass mean and biased
// variance, y = (x - mean) / sqrt(var + eps) weight + bias.
V layer_norm(const V& x, const V& weight, const V& bias) {
  const std::size_t cols = weight.size();
  V y(x.size());
  for (std::size_t r = 0; r < x.size() / cols; ++r) {
    double mean = 0.0, var = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      mean += x[r * cols + c] / static_cast<double>(cols);
    for (std::size_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean) / static_cast<double>(cols);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] =
          (x[r * cols + c] - mean) / std::sqrt(var + kLayerNormEps) * weight[c] + bias[c];
  }
  return y;
}

// Softmax of scale * x over rows of `cols`; with `causal`, x is a stack of [cols, cols] matrices
// and entry c of row r (query position r % cols) is -inf when c > r % cols.
V scaled_softmax(const V& x, std::size_t cols, double scale, bool causal) {
  return softmax_rows(map_values(x,
                                 [&](double u, std::size_t i) {
                                   const bool masked = causal && i % cols > i / cols % cols;
                                   return masked ? -kInfinity : scale * u;
                                 }),
                      cols);
}

// Rows ids[i] - first of a table [rows, cols] given flat; an id outside [first, first + rows)
// gives a zero row.
V gather_rows(const V& table, std::size_t cols, const Ids& ids, std::int64_t first) {
  const auto rows = static_cast<std::int64_t>(table.size() / cols);
  V out;
  for (const std::int64_t id : ids)
    for (std::size_t c = 0; c < cols; ++c)
      out.push_back(id >= first && id < first + rows
                        ? table[static_cast<std::size_t>(id - first) * cols + c]
                        : 0.0);
  return out;
}

// Sum over the rows of logits [rows, vocab] whose target is not kIgnoreTarget of log sum_c
// exp(logits[r, c]) - logits[r, targets[r]] (shifted by the row max), over `divisor`, or over
// the count of those rows when divisor is 0.
V cross_entropy(const V& logits, const Ids& targets, double divisor) {
  const std::size_t vocab = logits.size() / targets.size();
  double total = 0.0, counted = 0.0;
  for (std::size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == kernels::kIgnoreTarget) continue;
    double top = -kInfinity, sum = 0.0;
    for (std::size_t c = 0; c < vocab; ++c)
      top = std::max(top, logits[r * vocab + c]);
    for (std::size_t c = 0; c < vocab; ++c)
      sum += std::exp(logits[r * vocab + c] - top);
    total += std::log(sum) + top - logits[r * vocab + static_cast<std::size_t>(targets[r])];
    counted += 1.0;
  }
  return {total / (divisor > 0.0 ? divisor : counted)};
}

V concat_values(std::initializer_list<V> parts) {
  V all;
  for (const V& part : parts)
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

// One step of torch.optim.AdamW (PyTorch 1.13 _single_tensor_adamw, amsgrad off) in float64.
struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  std::int64_t step;

  void operator()(V& p, const V& g, V& m, V& v) const {
    const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1.0 - lr * weight_decay;
      m[i] = beta1 * m[i] + (1.0 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0 - beta2) * g[i] * g[i];
      const double denom = std::sqrt(v[i]) / std::sqrt(bias_correction2) + eps;
      p[i] -= lr / bias_correction1 * m[i] / denom;
    }
  }
};

V rounded_to_float(V x) {
  for (double& u : x)
    u = static_cast<float>(u);
  return x;
}

// Runs `step` as kernels::adamw_update on float32 copies on ctx.device and as the float64
// reference, and compares the update new - old, exp_avg and exp_avg_sq.
void expect_adamw(const ValidateContext& ctx, const AdamWStep& step, const V& p0, const V& g,
                  const V& m0, const V& v0, Comparison& out) {
  const V start[] = {rounded_to_float(p0), rounded_to_float(g), rounded_to_float(m0),
                     rounded_to_float(v0)};
  std::vector<Tensor> t;
  for (const V& values : start)
    t.push_back(Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())},
                                    autograd::DType::f32, ctx.device));
  kernels::adamw_update(t[0].buffer(), t[1].buffer(), t[2].buffer(), t[3].buffer(), step.lr,
                        step.beta1, step.beta2, step.eps, step.weight_decay, step.step);
  V p = start[0], m = start[2], v = start[3];
  step(p, start[1], m, v);
  const auto update = [&](const V& after) {
    return map_values(after, [&](double u, std::size_t i) { return u - start[0][i]; });
  };
  Comparison mine(ctx.tolerance);
  mine.expect_close(update(t[0].to_vector()), update(p));
  mine.expect_close(t[2].to_vector(), m);
  mine.expect_close(t[3].to_vector(), v);
  ctx.log.debug("kernels adamw step {}: {} (max_abs_error {:.3e}, max_rel_error {:.3e})", step.step,
                mine.passed() ? "pass" : "FAIL", mine.max_abs_error(), mine.max_rel_error());
  out.merge(mine);
}

}  // namespace

std::vector<OpCase> layer_norm_cases() {
  const V x = concat_values(
      {uniform_values(16, -2.0, 2.0, 40),
       map_values(uniform_values(8, -2.0, 2.0, 41), [](double u, auto) { return 100.0 + u; }),
       uniform_values(8, -2e-3, 2e-3, 42)});
  return {{"layer_norm",
           {{2, 2, 8}, {8}, {8}},
           {x, uniform_values(8, -1.5, 1.5, 43), uniform_values(8, -1.0, 1.0, 44)},
           {true, true, true},
           [](const HostValues& in) { return layer_norm(in[0], in[1], in[2]); },
           [](const std::vector<Tensor>& t) {
             return autograd::layer_norm(t[0], t[1], t[2], kLayerNormEps);
           }}};
}

std::vector<OpCase> causal_softmax_cases() {
  V above_diagonal(16);
  for (std::size_t i = 0; i < 16; ++i)
    above_diagonal[i] = i % 4 > i / 4 ? 1000.0 : -1000.0 + 0.75 * static_cast<double>(i % 5);
  const V causal_x = concat_values({uniform_values(16, -3.0, 3.0, 45), V(16, 2.0), above_diagonal,
                                    uniform_values(16, -40.0, 40.0, 46)});
  const V scaled_x = concat_values(
      {uniform_values(10, -1000.0, 1000.0, 47), {1000.0, 999.0, -1000.0, 998.0, 0.0}});
  return {unary_case(
              "causal softmax (scale 0.35)", {2, 2, 4, 4}, causal_x,
              [](const V& x) { return scaled_softmax(x, 4, 0.35, true); },
              [](const Tensor& t) { return autograd::softmax(t, true, 0.35); }),
          unary_case(
              "softmax (scale 0.125)", {3, 5}, scaled_x,
              [](const V& x) { return scaled_softmax(x, 5, 0.125, false); },
              [](const Tensor& t) { return autograd::softmax(t, false, 0.125); })};
}

std::vector<OpCase> embedding_cases() {
  const Ids ids{3, 0, 3, 4, 1, 3, 0, 2};
  const Ids slice_ids{0, 2, 4, 4, 5, 3, 1, 2};
  return {unary_case(
              "embedding (int64 ids, repeated)", {5, 3}, uniform_values(15, -2.0, 2.0, 48),
              [ids](const V& w) { return gather_rows(w, 3, ids, 0); },
              [ids](const Tensor& w) {
                return autograd::embedding(w, Tensor::from_indices(ids, {2, 4}, w.device()));
              }),
          unary_case(
              "embedding_slice rows [2, 5) (int32 ids)", {3, 3}, uniform_values(9, -2.0, 2.0, 49),
              [slice_ids](const V& w) { return gather_rows(w, 3, slice_ids, 2); },
              [slice_ids](const Tensor& w) {
                const V values(slice_ids.begin(), slice_ids.end());
                return autograd::embedding_slice(
                    w, Tensor::from_vector(values, {8}, autograd::DType::i32, w.device()), 2);
              })};
}

std::vector<OpCase> cross_entropy_cases() {
  const V logits = concat_values({uniform_values(12, -3.0, 3.0, 50),
                                  {1e4, -1e4, 9999.5, 5000.0, -3.0, 1e4},
                                  V(6, 7.0),
                                  {-1e4, 1e4, -2500.0, 0.0, 9998.0, 9999.0}});
  const auto one_case = [&logits](const char* name, Ids targets, double divisor) {
    return unary_case(
        name, {5, 6}, logits,
        [targets, divisor](const V& x) { return cross_entropy(x, targets, divisor); },
        [targets, divisor](const Tensor& x) {
          return autograd::cross_entropy(x, Tensor::from_indices(targets, {5}, x.device()),
                                         divisor);
        });
  };
  return {one_case("cross_entropy (int64 targets)", {1, 4, 2, 5, 0}, 0.0),
          one_case("cross_entropy (an ignored target, divisor 8)",
                   {1, 4, kernels::kIgnoreTarget, 5, 0}, 8.0),
          one_case("cross_entropy (two ignored targets)",
                   {1, kernels::kIgnoreTarget, 2, kernels::kIgnoreTarget, 0}, 0.0)};
}

LocalCheck check_adamw(const ValidateContext& ctx) {
  LocalCheck check{
      "KERNELS: AdamW update (one step) matches float64 reference of torch.optim.AdamW",
      Comparison(ctx.tolerance), ""};
  V g = uniform_values(16, -1.0, 1.0, 51);
  g[3] = 1e-7;
  g[7] = -3e-7;
  g[11] = 0.0;
  expect_adamw(ctx, {0.05, 0.9, 0.95, 1e-8, 0.1, 1}, uniform_values(16, -0.5, 0.5, 52), g,
               V(16, 0.0), V(16, 0.0), check.comparison);
  expect_adamw(ctx, {0.05, 0.9, 0.95, 1e-6, 0.1, 10}, uniform_values(16, -0.5, 0.5, 53),
               uniform_values(16, -1.0, 1.0, 54), uniform_values(16, -0.05, 0.05, 55),
               uniform_values(16, 0.0, 0.01, 56), check.comparison);
  return check;
}

}  // namespace mpitron::app
