#include "app/validate/kernel_checks.h"

#include <cmath>
#include <numbers>

#include "app/validate/kernel_checks_bf16.h"
#include "app/validate/kernel_checks_gpt.h"
#include "app/validate/kernel_checks_llama.h"
#include "autograd/ops.h"
#include "nn/layers/attention.h"

namespace mpitron::app {

using autograd::Tensor;
using V = std::vector<double>;
using Ts = std::vector<Tensor>;

namespace {

double gelu_exact(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}

double gelu_tanh(double x) {
  const double u = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}

// C[t] = op(A[t]) op(B[t]) for t < batch: op(A) [m, k] (A stored [k, m] when ta), op(B) [k, n]
// (B stored [n, k] when tb); a shared B is one matrix for every t.
struct Product {
  std::size_t batch, m, n, k;
  bool ta, tb, shared_b;
  V operator()(const V& a, const V& b) const {
    V c(batch * m * n, 0.0);
    for (std::size_t t = 0; t < batch; ++t) {
      const std::size_t b0 = shared_b ? 0 : t * k * n;
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t j = 0; j < n; ++j)
          for (std::size_t l = 0; l < k; ++l)
            c[(t * m + i) * n + j] +=
                a[t * m * k + (ta ? l * m + i : i * k + l)] * b[b0 + (tb ? j * k + l : l * n + j)];
    }
    return c;
  }
};

// out[i, j, l] = x[i, j, first + l] for x [d0, d1, d2] and l < length (narrow/split on a dim
// given by the strides: `inner` elements after the sliced dim, `extent` its size).
V slice(const V& x, std::size_t extent, std::size_t inner, std::size_t first, std::size_t length) {
  V y;
  for (std::size_t o = 0; o < x.size() / (extent * inner); ++o)
    for (std::size_t e = first; e < first + length; ++e)
      for (std::size_t i = 0; i < inner; ++i)
        y.push_back(x[(o * extent + e) * inner + i]);
  return y;
}

V sum_of(const V& x) {
  double s = 0.0;
  for (double v : x)
    s += v;
  return {s};
}

std::vector<OpCase> gelu_cases() {
  V x = uniform_values(23, -3.0, 3.0, 1);
  for (int i = -20; i <= 20; ++i)
    x.push_back(0.5 * i);  // [-10, 10]
  const autograd::Shape shape{static_cast<std::int64_t>(x.size())};
  return {
      unary_case(
          "gelu exact", shape, x,
          [](const V& v) { return map_values(v, [](double u, auto) { return gelu_exact(u); }); },
          [](const Tensor& t) { return autograd::gelu(t, kernels::GeluForm::exact); }),
      unary_case(
          "gelu tanh", shape, x,
          [](const V& v) { return map_values(v, [](double u, auto) { return gelu_tanh(u); }); },
          [](const Tensor& t) { return autograd::gelu(t, kernels::GeluForm::tanh); }),
      // x [2, 3, 4], fc1 [6, 4] + bias [6], fc2 [3, 6]: gelu(x W1^T + b1) W2^T.
      {"fused MLP (exact)",
       {{2, 3, 4}, {6, 4}, {6}, {3, 6}},
       {uniform_values(24, -2, 2, 40), uniform_values(24, -1, 1, 41), uniform_values(6, -1, 1, 42),
        uniform_values(18, -1, 1, 43)},
       {true, true, true, true},
       [](const HostValues& in) {
         const V pre = Product{1, 6, 6, 4, false, true, true}(in[0], in[1]);
         const V act =
             map_values(pre, [&](double v, std::size_t i) { return gelu_exact(v + in[2][i % 6]); });
         return Product{1, 6, 3, 6, false, true, true}(act, in[3]);
       },
       [](const Ts& t) { return autograd::fused_mlp(t[0], t[1], t[2], t[3]); }}};
}

std::vector<OpCase> softmax_cases() {
  V x = uniform_values(6, -3.0, 3.0, 2);
  for (double v : {-kInfinity, 1.0, 2.0, -kInfinity, 0.5, -1.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0,
                   1000.0, 999.0, 998.5, -1000.0, 1000.0, 0.0})
    x.push_back(v);
  return {unary_case(
      "softmax", {4, 6}, x, [](const V& v) { return softmax_rows(v, 6); },
      [](const Tensor& t) { return autograd::softmax(t); })};
}

std::vector<OpCase> product_cases() {
  std::vector<OpCase> cases{
      {"linear",
       {{2, 3, 4}, {5, 4}, {5}},
       {uniform_values(24, -2, 2, 3), uniform_values(20, -1, 1, 4), uniform_values(5, -1, 1, 5)},
       {true, true, true},
       [](const HostValues& in) {
         V y = Product{1, 6, 5, 4, false, true, true}(in[0], in[1]);
         return map_values(y, [&](double v, std::size_t i) { return v + in[2][i % 5]; });
       },
       [](const Ts& t) { return autograd::linear(t[0], t[1], t[2]); }}};
  const char* names[] = {"matmul", "matmul trans_a", "matmul trans_b", "matmul shared b"};
  for (int i = 0; i < 4; ++i) {
    const Product p{2, 3, 5, 4, i == 1, i == 2, i == 3};
    const autograd::Shape sa = p.ta ? autograd::Shape{2, 4, 3} : autograd::Shape{2, 3, 4};
    const autograd::Shape sb = p.shared_b ? autograd::Shape{4, 5}
                               : p.tb     ? autograd::Shape{2, 5, 4}
                                          : autograd::Shape{2, 4, 5};
    cases.push_back(binary_case(
        names[i], sa, uniform_values(24, -2, 2, 6 + i), sb,
        uniform_values(p.shared_b ? 20 : 40, -2, 2, 10 + i), p,
        [p](const Tensor& a, const Tensor& b) { return autograd::matmul(a, b, p.ta, p.tb); }));
  }
  for (const bool causal : {false, true}) {
    cases.push_back(
        {causal ? "causal unfused attention core (2 heads)" : "unfused attention core (2 heads)",
         {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
         {uniform_values(24, -2, 2, 14 + 3 * causal), uniform_values(24, -2, 2, 15 + 3 * causal),
          uniform_values(24, -2, 2, 16 + 3 * causal)},
         {true, true, true},
         [causal](const HostValues& in) {
           return attention_reference(in[0], in[1], in[2], {2, 3, 2, 2, causal});
         },
         [causal](const Ts& t) {
           return nn::unfused_attention_core(t[0], t[1], t[2], 2, causal);
         }});
  }
  return cases;
}

// One case of the fused attention on q, k, v [slices, seq, head_dim] (heads = 1 per slice of the
// reference loop): q in [0.5, 1.5] and k in [-1.5, 1.5], but from key 64 on k in [4, 5], so a row
// that reaches a second key block of the CPU kernel (64 keys) finds its max there (scores near
// 4.5 head_dim / sqrt(head_dim), against at most 2.25 head_dim / sqrt(head_dim) in the first)
// and the online softmax must rescale what it summed against the first block's max. The
// reference's gradients are analytical: central differences at seq 66 would cost 0.1 CPU-s.
OpCase fused_attention_case(const char* name, std::size_t slices, std::size_t seq,
                            std::size_t head_dim, bool causal, std::uint64_t seed) {
  const std::size_t n = slices * seq * head_dim;
  const autograd::Shape shape{static_cast<std::int64_t>(slices), static_cast<std::int64_t>(seq),
                              static_cast<std::int64_t>(head_dim)};
  const V k = map_values(uniform_values(n, -1.5, 1.5, seed + 1), [&](double u, std::size_t i) {
    return i / head_dim % seq >= 64 ? 4.5 + u / 3.0 : u;
  });
  const AttentionSizes z{slices, seq, 1, head_dim, causal};
  return {name,
          {shape, shape, shape},
          {uniform_values(n, 0.5, 1.5, seed), k, uniform_values(n, -2, 2, seed + 2)},
          {true, true, true},
          [z](const HostValues& in) { return attention_reference(in[0], in[1], in[2], z); },
          [causal](const Ts& t) {
            return autograd::scaled_dot_product_attention(t[0], t[1], t[2], causal);
          },
          [z](const HostValues& in, const V& dy) {
            return attention_reference_vjp(in[0], in[1], in[2], dy, z);
          }};
}

// The fused kernel at the sizes that reach its edges: two key blocks with a partial second one
// (causal seq 66, odd head_dim), seq 1 with several slices, and the model layer's path through
// it (heads split and put back; small enough for central differences). The unit tests
// (tests/kernels/test_attention.cpp) cover more sizes.
std::vector<OpCase> fused_attention_cases() {
  return {fused_attention_case("fused causal attention [1, 66, 3]", 1, 66, 3, true, 60),
          fused_attention_case("fused causal attention, seq 1 [3, 1, 5]", 3, 1, 5, true, 66),
          {"causal attention core (2 heads, fused)",
           {{2, 5, 6}, {2, 5, 6}, {2, 5, 6}},
           {uniform_values(60, -2, 2, 69), uniform_values(60, -2, 2, 70),
            uniform_values(60, -2, 2, 71)},
           {true, true, true},
           [](const HostValues& in) {
             return attention_reference(in[0], in[1], in[2], {2, 5, 2, 3, true});
           },
           [](const Ts& t) { return nn::multi_head_attention_core(t[0], t[1], t[2], 2, true); }}};
}

std::vector<OpCase> elementwise_cases() {
  const autograd::Shape s{2, 3, 4};
  const V a = uniform_values(24, -2, 2, 20), b = uniform_values(24, -2, 2, 21);
  const auto each = [](auto f) {
    return [f](const V& x, const V& y) {
      return map_values(x, [&](double u, std::size_t i) { return f(u, y[i]); });
    };
  };
  return {binary_case("add", s, a, s, b, each(std::plus<>()), autograd::add),
          binary_case(
              "add bias", s, a, {4}, uniform_values(4, -2, 2, 22),
              [](const V& x, const V& bias) {
                return map_values(x, [&](double u, std::size_t i) { return u + bias[i % 4]; });
              },
              autograd::add),
          binary_case("sub", s, a, s, b, each(std::minus<>()), autograd::sub),
          binary_case("mul", s, a, s, b, each(std::multiplies<>()), autograd::mul),
          unary_case(
              "scale", s, a,
              [](const V& x) { return map_values(x, [](double u, auto) { return -2.5 * u; }); },
              [](const Tensor& t) { return autograd::scale(t, -2.5); }),
          unary_case("sum", s, a, sum_of, autograd::sum),
          unary_case(
              "mean", s, a, [](const V& x) { return V{sum_of(x)[0] / 24.0}; }, autograd::mean),
          binary_case(
              "mse_loss", s, a, s, b,
              [](const V& x, const V& y) {
                double total = 0.0;
                for (std::size_t i = 0; i < x.size(); ++i)
                  total += (x[i] - y[i]) * (x[i] - y[i]);
                return V{total / static_cast<double>(x.size())};
              },
              autograd::mse_loss, false),
          unary_case(
              "reshape", s, a, [](const V& x) { return x; },
              [](const Tensor& t) {
                return autograd::reshape(t, {6, 4});
              }),
          unary_case(
              "transpose 0, 2", s, a,
              [](const V& x) {
                V y(24);
                for (std::size_t i = 0; i < 2; ++i)
                  for (std::size_t j = 0; j < 3; ++j)
                    for (std::size_t k = 0; k < 4; ++k)
                      y[(k * 3 + j) * 2 + i] = x[(i * 3 + j) * 4 + k];
                return y;
              },
              [](const Tensor& t) { return autograd::transpose(t, 0, 2); }),
          unary_case(
              "narrow dim 1", s, a, [](const V& x) { return slice(x, 3, 4, 1, 2); },
              [](const Tensor& t) { return autograd::narrow(t, 1, 1, 2); }),
          unary_case(
              "split dim 2, part 1", s, a, [](const V& x) { return slice(x, 4, 1, 2, 2); },
              [](const Tensor& t) { return autograd::split(t, 2, 2)[1]; }),
          binary_case(
              "concat dim 1", s, a, {2, 2, 4}, uniform_values(16, -2, 2, 23),
              [](const V& x, const V& y) {
                V out;
                for (std::size_t i = 0; i < 2; ++i) {
                  out.insert(out.end(), x.begin() + i * 12, x.begin() + (i + 1) * 12);
                  out.insert(out.end(), y.begin() + i * 8, y.begin() + (i + 1) * 8);
                }
                return out;
              },
              [](const Tensor& x, const Tensor& y) {
                return autograd::concat({x, y}, 1);
              })};
}

// h = a * b feeds three paths (h * h, 3 h) and a feeds the output directly too, so the engine
// must sum a non-leaf's incoming gradients and accumulate a leaf's.
std::vector<OpCase> engine_cases() {
  return {binary_case(
      "shared intermediate", {2, 3}, uniform_values(6, -2, 2, 30), {2, 3},
      uniform_values(6, -2, 2, 31),
      [](const V& a, const V& b) {
        return map_values(a, [&](double u, std::size_t i) {
          const double h = u * b[i];
          return h * h + 3.0 * h + u;
        });
      },
      [](const Tensor& a, const Tensor& b) {
        const Tensor h = autograd::mul(a, b);
        return autograd::add(autograd::add(autograd::mul(h, h), autograd::scale(h, 3.0)), a);
      })};
}

}  // namespace

std::vector<LocalCheck> check_kernels(const ValidateContext& ctx) {
  const std::pair<const char*, std::vector<OpCase> (*)()> groups[] = {
      {"KERNELS: GELU (exact and tanh; in the fused MLP) forward and backward match float64 "
       "reference",
       gelu_cases},
      {"KERNELS: softmax forward and backward match float64 reference", softmax_cases},
      {"KERNELS: linear, matmul and attention core forward and backward match float64 reference",
       product_cases},
      {"KERNELS: element-wise, reduction, loss and shape ops forward and backward match float64 "
       "reference",
       elementwise_cases},
      {"KERNELS: backward engine (shared intermediate, reused leaf) matches float64 reference",
       engine_cases},
      {"KERNELS: LayerNorm forward and backward (dx, dweight, dbias) match float64 reference",
       layer_norm_cases},
      {"KERNELS: causal and scaled softmax forward and backward match float64 reference",
       causal_softmax_cases},
      {"KERNELS: fused causal attention (online softmax in blocks) forward and backward match "
       "float64 reference",
       fused_attention_cases},
      {"KERNELS: embedding gather and scatter-add backward (repeated ids, vocabulary slice) match "
       "float64 reference",
       embedding_cases},
      {"KERNELS: cross-entropy (row max, statistics, loss, backward) forward and backward match "
       "float64 reference",
       cross_entropy_cases},
      {"KERNELS: RMSNorm forward and backward (dx, dweight) match float64 reference",
       rms_norm_cases},
      {"KERNELS: rotary position embedding (rotate_half pairs, generation offset) forward and "
       "backward match float64 reference",
       rotary_cases},
      {"KERNELS: SwiGLU (silu(gate) * up) forward and backward match float64 reference",
       swiglu_cases}};
  std::vector<LocalCheck> checks;
  std::uint64_t seed = 100;
  for (const auto& [name, cases] : groups) {
    LocalCheck check{name, Comparison(ctx.tolerance), ""};
    for (OpCase& c : cases())
      expect_op(ctx, std::move(c), seed++, check.comparison);
    checks.push_back(check);
  }
  checks.push_back(check_adamw(ctx));
  checks.push_back(check_bf16_conversion(ctx));
  checks.push_back(check_bf16_gemm(ctx));
  return checks;
}

}  // namespace mpitron::app
