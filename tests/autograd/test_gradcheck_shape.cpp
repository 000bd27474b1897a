// Central-difference gradient checks (float64) of the shape ops: reshape, transpose, narrow, split
// and concat. Their gradients are pure data movement, so a wrong index shows as an O(1) error.
// Tolerances: see autograd_test_support.h.
#include <gtest/gtest.h>

#include <utility>

#include "autograd/ops.h"
#include "autograd_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

class GradcheckShape : public AutogradTest {};

TEST_P(GradcheckShape, ReshapeIncludingAnInferredExtent) {
  const Inputs inputs{normal({2, 3, 4}, 31)};
  for (const Shape& shape : {Shape{4, -1}, Shape{24}, Shape{3, 2, 2, 2}}) {
    SCOPED_TRACE(to_string(shape));
    EXPECT_TRUE(
        gradcheck_passes([shape](const Inputs& in) { return reshape(in[0], shape); }, inputs));
  }
}

// Includes a dim swapped with itself (the identity, as in torch.transpose).
TEST_P(GradcheckShape, TransposeOfSeveralDimPairsOfA4DTensor) {
  const Inputs inputs{normal({2, 3, 4, 5}, 32)};
  for (const auto& [d0, d1] :
       {std::pair{0, 1}, std::pair{1, 2}, std::pair{2, 3}, std::pair{0, 3}, std::pair{3, 1},
        std::pair{-1, -3}, std::pair{2, 2}, std::pair{1, -3}}) {
    SCOPED_TRACE(::testing::Message() << "dims " << d0 << ", " << d1);
    EXPECT_TRUE(
        gradcheck_passes([d0, d1](const Inputs& in) { return transpose(in[0], d0, d1); }, inputs));
  }
}

TEST_P(GradcheckShape, NarrowAlongEachDim) {
  const Inputs inputs{normal({3, 4, 5}, 33)};
  for (const int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    EXPECT_TRUE(
        gradcheck_passes([dim](const Inputs& in) { return narrow(in[0], dim, 1, 2); }, inputs));
  }
}

TEST_P(GradcheckShape, SplitRoutesEachChunksGradient) {
  // y = p0 + 2 p1 - 3 p2: each chunk's gradient is distinguishable by its factor.
  const Inputs inputs{normal({3, 6, 2}, 34)};
  for (const int dim : {1, -1, 0}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const int chunks = dim == -1 ? 2 : 3;
    EXPECT_TRUE(gradcheck_passes(
        [dim, chunks](const Inputs& in) {
          const std::vector<Tensor> parts = split(in[0], chunks, dim);
          Tensor y = parts[0];
          for (int i = 1; i < chunks; ++i) {
            y = add(y, scale(parts[static_cast<std::size_t>(i)], i % 2 == 1 ? 2.0 : -3.0));
          }
          return y;
        },
        inputs));
  }
}

TEST_P(GradcheckShape, ConcatOfUnequalPartsAlongEachDim) {
  for (const int dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const int d = dim < 0 ? dim + 3 : dim;
    Inputs inputs;
    for (const std::int64_t extent : {1, 3, 2}) {
      Shape shape{2, 3, 4};
      shape[static_cast<std::size_t>(d)] = extent;
      inputs.push_back(normal(shape, static_cast<std::uint64_t>(35 + extent)));
    }
    EXPECT_TRUE(gradcheck_passes([dim](const Inputs& in) { return concat(in, dim); }, inputs));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, GradcheckShape, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

}  // namespace
}  // namespace mpitron::test
