// Multi-head attention: the dense block against naive double loops, and the tensor-parallel
// block (TP group = the world) against the dense block, forward and every gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "gpt_test_support.h"
#include "kernels/ops.h"
#include "nn/layers/attention.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::DType;
using autograd::Tensor;

// y[r, o] = sum_i x[r, i] w[o, i] + b[o] for x [rows, in].
std::vector<double> naive_linear(const std::vector<double>& x, const LinearWeights& layer,
                                 std::int64_t rows) {
  const std::vector<double> w = layer.weight.to_vector(), b = layer.bias.to_vector();
  const std::int64_t out = layer.weight.size(0), in = layer.weight.size(1);
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = b[o];
      for (std::int64_t i = 0; i < in; ++i)
        sum += x[r * in + i] * w[o * in + i];
      y[r * out + o] = sum;
    }
  }
  return y;
}

// Vaswani et al. eq. 1 per head with explicit loops: x [batch, seq, embed]; with `causal`, query
// i sees keys j <= i only.
std::vector<double> naive_attention(const Tensor& x, const AttentionWeights& w, std::int64_t heads,
                                    bool causal = false) {
  const std::int64_t batch = x.size(0), seq = x.size(1), embed = x.size(2);
  const std::int64_t d = embed / heads, rows = batch * seq;
  const std::vector<double> in = x.to_vector();
  const auto q = naive_linear(in, w.q, rows), k = naive_linear(in, w.k, rows),
             v = naive_linear(in, w.v, rows);
  std::vector<double> context(static_cast<std::size_t>(rows * embed), 0.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < seq; ++i) {
        const std::int64_t keys = causal ? i + 1 : seq;
        std::vector<double> p(static_cast<std::size_t>(keys));
        double largest = -INFINITY, total = 0.0;
        for (std::int64_t j = 0; j < keys; ++j) {
          double dot = 0.0;
          for (std::int64_t c = 0; c < d; ++c) {
            dot += q[(b * seq + i) * embed + h * d + c] * k[(b * seq + j) * embed + h * d + c];
          }
          p[j] = dot / std::sqrt(static_cast<double>(d));
          largest = std::max(largest, p[j]);
        }
        for (double& value : p)
          total += (value = std::exp(value - largest));
        for (std::int64_t j = 0; j < keys; ++j) {
          for (std::int64_t c = 0; c < d; ++c) {
            context[(b * seq + i) * embed + h * d + c] +=
                p[j] / total * v[(b * seq + j) * embed + h * d + c];
          }
        }
      }
    }
  }
  return naive_linear(context, w.out, rows);
}

TEST(MultiHeadAttention, DenseMatchesNaiveLoops) {
  const std::int64_t embed = 12, heads = 3;
  const AttentionWeights w = make_attention_weights_normal(embed, 4, DType::f64, Device::cpu);
  const Tensor x = autograd::randn({2, 5, embed}, 9, 1.0, DType::f64);
  const Tensor y = MultiHeadAttention(w, heads).forward(x);
  ASSERT_EQ(y.shape(), x.shape());
  // float64, O(1) values, sums of <= 12 terms: differences are a few ulps (~1e-15).
  test::expect_close(y, Tensor::from_vector(naive_attention(x, w, heads), x.shape(), DType::f64),
                     1e-12);
}

TEST(MultiHeadAttention, CausalDenseMatchesNaiveLoops) {
  const std::int64_t embed = 12, heads = 3;
  const AttentionWeights w = make_attention_weights_normal(embed, 5, DType::f64, Device::cpu);
  const Tensor x = autograd::randn({2, 6, embed}, 10, 1.0, DType::f64);
  const Tensor y = MultiHeadAttention(w, heads, /*causal=*/true).forward(x);
  // As the non-causal case: a few ulps. Position 0 sees only itself: its output is out(v(x_0)).
  test::expect_close(
      y, Tensor::from_vector(naive_attention(x, w, heads, true), x.shape(), DType::f64), 1e-12);
  const Tensor full = MultiHeadAttention(w, heads).forward(x);
  EXPECT_GT(std::abs(y.to_vector()[embed] - full.to_vector()[embed]), 1e-6);  // the mask acts
}

// Central differences (float64) through the fused causal, scaled softmax and both batched
// products; tolerances as in the autograd gradchecks (atol 1e-6 + rtol 1e-5, >= 100x margin).
TEST(MultiHeadAttention, CausalCoreGradcheck) {
  const auto normal = [](std::uint64_t seed) {
    return autograd::randn({2, 4, 6}, seed, 1.0, DType::f64);
  };
  const autograd::GradcheckResult result = autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return multi_head_attention_core(in[0], in[1], in[2], 2, /*causal=*/true);
      },
      {normal(30), normal(31), normal(32)}, 1e-6, 1e-6, 1e-5);
  EXPECT_TRUE(result.passed) << result.worst;
}

// Heads 2*tp of 4 dims each (embed 8 tp). Dense and TP compute the same sums in other orders, so
// they differ by rounding: the longest chain of sums is the input gradient's (embed terms per
// projection, <= 32 on 4 ranks, through softmax and two batched products), so f32 differs by
// <~ 4 * 32 * 1.2e-7 = 1.5e-5 relative (2e-5 used); f64 by ~1e-14 (1e-11 used). A wrong shard,
// a missing all-reduce or a doubled bias errs by O(1).
class ParallelAttention : public ::testing::TestWithParam<DType> {
 protected:
  void check_parallel_matches_dense(bool causal);
};

TEST_P(ParallelAttention, ForwardAndEveryGradientMatchDense) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    check_parallel_matches_dense(causal);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ParallelAttention, ::testing::Values(DType::f64, DType::f32),
                         [](const auto& info) { return kernels::to_string(info.param); });

void ParallelAttention::check_parallel_matches_dense(bool causal) {
  const comm::Communicator& tp = test::world();
  const DType dtype = GetParam();
  const double tolerance = dtype == DType::f64 ? 1e-11 : 2e-5;
  const std::int64_t heads = 2 * tp.size(), embed = 4 * heads;
  const AttentionWeights w = make_attention_weights_normal(embed, 21, dtype, Device::cpu);
  const ParallelMultiHeadAttention parallel(w, heads, tp, causal);
  const MultiHeadAttention dense(w, heads, causal);
  Tensor x_parallel = autograd::randn({2, 3, embed}, 22, 1.0, dtype).set_requires_grad();
  Tensor x_dense = x_parallel.detach().clone().set_requires_grad();
  const Tensor dy = autograd::randn({2, 3, embed}, 23, 1.0, dtype);

  const Tensor y_parallel = parallel.forward(x_parallel);
  const Tensor y_dense = dense.forward(x_dense);
  test::expect_close(y_parallel, y_dense, tolerance);
  autograd::sum(autograd::mul(y_parallel, dy)).backward();
  autograd::sum(autograd::mul(y_dense, dy)).backward();
  test::expect_close(x_parallel.grad(), x_dense.grad(), tolerance);

  const Parameters mine = parallel.parameters(), full = dense.parameters();
  ASSERT_EQ(mine.size(), 8u);
  const std::int64_t width = embed / tp.size();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    SCOPED_TRACE(mine[i].name);
    ASSERT_EQ(mine[i].name, full[i].name);
    Tensor expected = full[i].tensor.grad();
    if (i < 6) {  // q, k, v: this rank's rows (weights) and entries (biases)
      expected = autograd::narrow(expected, 0, tp.rank() * width, width);
    } else if (i == 6) {  // out.weight: this rank's columns
      expected = autograd::narrow(expected, 1, tp.rank() * width, width);
    }  // out.bias: replicated, the full gradient on every rank
    test::expect_close(mine[i].tensor.grad(), expected, tolerance);
  }
}

TEST(AttentionSizes, ReportsTheFirstRuleThatFails) {
  EXPECT_EQ(attention_size_error(512, 8, 4), std::nullopt);
  EXPECT_EQ(attention_size_error(512, 6, 4), "--heads 6 is not divisible by tp 4");
  EXPECT_EQ(attention_size_error(100, 8, 2), "--embed 100 is not divisible by --heads 8");
  EXPECT_EQ(attention_size_error(64, 0, 1), "--heads must be >= 1, got 0");
  const AttentionWeights w = make_attention_weights_normal(12, 0, DType::f32, Device::cpu);
  EXPECT_THROW(MultiHeadAttention(w, 5), std::invalid_argument);
  // heads = tp + 1 is never divisible by tp > 1; on one rank 13 heads do not divide 12.
  const comm::Communicator& tp = test::world();
  EXPECT_THROW(ParallelMultiHeadAttention(w, tp.size() == 1 ? 13 : tp.size() + 1, tp),
               std::invalid_argument);
}

TEST(AttentionWeights, ArangeIsTheReferenceProgramsInit) {
  const AttentionWeights w = make_attention_weights_arange(4, DType::f64, Device::cpu);
  const std::pair<const LinearWeights*, double> layers[] = {
      {&w.q, 0.1}, {&w.k, -0.2}, {&w.v, 0.3}, {&w.out, -0.4}};
  for (const auto& [layer, offset] : layers) {
    const std::vector<double> weight = layer->weight.to_vector(), bias = layer->bias.to_vector();
    ASSERT_EQ(layer->weight.shape(), (autograd::Shape{4, 4}));
    for (std::size_t i = 0; i < weight.size(); ++i)
      EXPECT_EQ(weight[i], i + offset);
    for (std::size_t i = 0; i < bias.size(); ++i)
      EXPECT_EQ(bias[i], i + offset);
  }
}

}  // namespace
}  // namespace mpitron::nn
