// Integer tensors (token ids and targets): the factories and to_vector are exact, values that are
// not integers of the dtype are rejected by position, and no integer tensor can require grad.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

class IntegerTensors : public AutogradTest {};

TEST_P(IntegerTensors, FactoriesRoundTripExactly) {
  // 2^53 is the largest power of two every int64 factory must carry through double exactly.
  const std::vector<double> values{0, -1, 255, 50303, 9007199254740992.0, -2147483648.0};
  const Tensor wide = Tensor::from_vector(values, {2, 3}, DType::i64, device());
  EXPECT_EQ(wide.dtype(), DType::i64);
  EXPECT_EQ(wide.to_vector(), values);
  const std::vector<double> narrow{-2147483648.0, 2147483647.0, 7, 0};
  EXPECT_EQ(Tensor::from_vector(narrow, {4}, DType::i32, device()).to_vector(), narrow);

  const Tensor ids = Tensor::from_indices({3, 1, 4, 1, 5, 9}, {3, 2}, device());
  EXPECT_EQ(ids.dtype(), DType::i64);
  EXPECT_EQ(ids.device(), device());
  EXPECT_EQ(ids.shape(), (Shape{3, 2}));
  EXPECT_EQ(ids.to_vector(), (std::vector<double>{3, 1, 4, 1, 5, 9}));

  for (DType dtype : {DType::i32, DType::i64}) {
    EXPECT_EQ(Tensor::zeros({2, 2}, dtype, device()).to_vector(), std::vector<double>(4, 0.0));
    EXPECT_EQ(Tensor::empty({5}, dtype, device()).numel(), 5);
    EXPECT_EQ(Tensor::full({3}, 17, dtype, device()).to_vector(), std::vector<double>(3, 17.0));
  }
}

TEST_P(IntegerTensors, CannotRequireGrad) {
  Tensor ids = Tensor::from_indices({1, 2}, {2}, device());
  EXPECT_THROW(ids.set_requires_grad(), std::invalid_argument);
  EXPECT_NO_THROW(ids.set_requires_grad(false));
  EXPECT_FALSE(ids.requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Devices, IntegerTensors, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

// Each case: the first offending position and value appear in the message.
TEST(IntegerTensors, FromVectorRejectsValuesTheDtypeCannotHold) {
  const auto message = [](const std::vector<double>& values, DType dtype) {
    try {
      Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}, dtype);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message({1, 2.5, 3.5}, DType::i64),
            "from_vector: value 2.5 at position 1 is not an int64");
  EXPECT_EQ(message({0, 1, 2147483648.0}, DType::i32),
            "from_vector: value 2147483648 at position 2 is not an int32");
  EXPECT_EQ(message({-9223372036854775808.0 * 2}, DType::i64),
            "from_vector: value -1.8446744073709552e+19 at position 0 is not an int64");
  EXPECT_EQ(message({std::numeric_limits<double>::quiet_NaN()}, DType::i32),
            "from_vector: value nan at position 0 is not an int32");
  EXPECT_THROW(Tensor::from_indices({1, 2, 3}, {2}), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::test
