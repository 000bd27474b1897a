// rms_norm, rotary_embedding and swiglu: central-difference gradchecks (float64, tolerances in
// autograd_test_support.h), the properties of the rotation (norm kept, backward the inverse),
// and bad input with its message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "autograd_test_support.h"
#include "support/compare.h"
#include "support/error_message.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

class LlamaOps : public AutogradTest {};

TEST_P(LlamaOps, RmsNormGradcheck) {
  // Rows of std 2 and one row of std 1e-3 (mean square 1e-6 below eps 1e-5, where eps shapes
  // the derivative), with weight and without it needing a gradient.
  const Tensor small = scale(normal({1, 1, 5}, 80), 1e-3);
  const Tensor x = concat({normal({2, 3, 5}, 81, 2.0), concat({small, small, small}, 1)}, 0);
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return rms_norm(in[0], in[1], 1e-5); },
                               {x, normal({5}, 82)}));
  const Tensor weight = normal({5}, 83);
  EXPECT_TRUE(
      gradcheck_passes([weight](const Inputs& in) { return rms_norm(in[0], weight, 1e-5); }, {x}));
}

TEST_P(LlamaOps, RotaryEmbeddingGradcheckAtSeveralOffsetsAndBases) {
  // x [batch 2, seq 3, heads 2, head_dim 6]; offsets 0 and 1021 (a generation step).
  const Tensor x = normal({2, 3, 2, 6}, 84);
  for (const double theta : {10000.0, 500000.0}) {
    for (const std::int64_t offset : {std::int64_t{0}, std::int64_t{1021}}) {
      SCOPED_TRACE(::testing::Message() << "theta " << theta << " offset " << offset);
      EXPECT_TRUE(gradcheck_passes(
          [theta, offset](const Inputs& in) { return rotary_embedding(in[0], theta, offset); },
          {x}));
    }
  }
}

// A rotation keeps each pair's length; position 0 is the identity; offset k of a sequence is
// the same as positions k.. of a longer one (what generation relies on).
TEST_P(LlamaOps, RotaryEmbeddingKeepsNormsAndShiftsPositionsByTheOffset) {
  const Tensor x = normal({1, 4, 3, 8}, 85);
  const std::vector<double> in = x.to_vector(), out = rotary_embedding(x, 10000.0).to_vector();
  for (std::size_t head = 0; head < in.size() / 8; ++head) {
    for (std::size_t i = 0; i < 4; ++i) {
      const std::size_t lo = head * 8 + i, hi = lo + 4;
      EXPECT_NEAR(std::hypot(out[lo], out[hi]), std::hypot(in[lo], in[hi]), 1e-14);
      if (head < 3) {  // token 0, position 0
        EXPECT_EQ(out[lo], in[lo]);
        EXPECT_EQ(out[hi], in[hi]);
      }
    }
  }
  const Tensor shifted = rotary_embedding(narrow(x, 1, 2, 2), 10000.0, 2);
  expect_close(shifted, narrow(rotary_embedding(x, 10000.0), 1, 2, 2), 0.0);
}

TEST_P(LlamaOps, SwigluGradcheck) {
  // std 3 reaches both tails of the sigmoid and its curved middle.
  EXPECT_TRUE(gradcheck_passes([](const Inputs& in) { return swiglu(in[0], in[1]); },
                               {normal({3, 7}, 86, 3.0), normal({3, 7}, 87)}));
}

// The ops as a Llama block composes them: RMSNorm, q and k rotated in [batch, seq, heads,
// head_dim] (at positions from 5) before the heads move forward, v not, causal attention, then a
// SwiGLU of gate and up from one projection; every input's gradient through all of them.
TEST_P(LlamaOps, ComposedLlamaBlockGradcheck) {
  const Inputs inputs{normal({1, 3, 8}, 88),    normal({8}, 89),          normal({8, 8}, 90, 0.35),
                      normal({8, 8}, 91, 0.35), normal({8, 8}, 92, 0.35), normal({6, 8}, 93, 0.35)};
  EXPECT_TRUE(gradcheck_passes(
      [](const Inputs& in) {
        const Tensor h = rms_norm(in[0], in[1], 1e-5);
        const auto heads = [&](const Tensor& w) { return reshape(linear(h, w), {1, 3, 2, 4}); };
        const auto rotated = [&](const Tensor& w) {
          return transpose(rotary_embedding(heads(w), 500000.0, 5), 1, 2);
        };
        const Tensor context = scaled_dot_product_attention(rotated(in[2]), rotated(in[3]),
                                                            transpose(heads(in[4]), 1, 2), true);
        const Tensor mixed = reshape(transpose(context, 1, 2), {1, 3, 8});
        const std::vector<Tensor> gate_up = split(linear(mixed, in[5]), 2, 2);
        return swiglu(gate_up[0], gate_up[1]);
      },
      inputs));
}

INSTANTIATE_TEST_SUITE_P(Devices, LlamaOps, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

TEST(LlamaOpsBadInput, MessagesNameTheOpAndTheShapes) {
  const Tensor x = Tensor::zeros({2, 4});
  EXPECT_EQ(message_of<std::invalid_argument>([&] { rms_norm(x, Tensor::zeros({3}), 1e-5); }),
            "rms_norm: weight [3] does not match the last dim of x [2, 4]");
  EXPECT_THAT(message_of<std::invalid_argument>([&] { rms_norm(x, Tensor::zeros({4}), -1.0); }),
              names("rms_norm", "eps must be >= 0"));
  for (const Shape& shape : {Shape{2, 3, 4}, Shape{1, 2, 3, 5}, Shape{1, 0, 3, 4}}) {
    EXPECT_EQ(
        message_of<std::invalid_argument>([&] { rotary_embedding(Tensor::zeros(shape), 10000.0); }),
        "rotary_embedding: x " + to_string(shape) +
            " is not [batch, seq, heads, head_dim] with seq, heads >= 1 and an even "
            "head_dim >= 2");
  }
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                rotary_embedding(Tensor::zeros({1, 2, 3, 4}), -1.0);
              }),
              names("rotary_embedding", "theta -1 is not a finite number > 0"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                rotary_embedding(Tensor::zeros({1, 2, 3, 4}), 1e4, -3);
              }),
              names("rotary_embedding", "position_offset must be >= 0, got -3"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                swiglu(x, Tensor::zeros({4, 2}));
              }),
              names("swiglu", "[2, 4]", "[4, 2]"));
}

}  // namespace
}  // namespace mpitron::test
