// Bad input: every op that constrains shapes rejects a mismatch with an exception whose message
// names the op and the offending shapes. (scale, gelu and sum accept any shape.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "autograd_test_support.h"
#include "support/error_message.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

using mpitron::test::message_of;
using mpitron::test::names;

Tensor zeros(const Shape& shape) {
  return Tensor::zeros(shape);
}

TEST(BadInput, Linear) {
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                linear(zeros({2, 5}), zeros({4, 3}));
              }),
              names("linear", "[2, 5]", "[4, 3]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                linear(zeros({2, 3}), zeros({4, 3}), zeros({3}));
              }),
              names("linear", "[4, 3]", "bias [3]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                linear(zeros({2, 3}), zeros({3}));
              }),
              names("linear", "[2, 3]", "weight [3]"));
}

TEST(BadInput, FusedMlp) {
  // x [2, 5] against fc1 [6, 4]; then fc2 [3, 7] against mid 6; then no fc1 bias.
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                fused_mlp(zeros({2, 5}), zeros({6, 4}), zeros({6}), zeros({3, 6}));
              }),
              names("fused_mlp", "input [2, 5]", "fc1 weight [6, 4]", "fc2 weight [3, 6]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                fused_mlp(zeros({2, 4}), zeros({6, 4}), zeros({6}), zeros({3, 7}));
              }),
              names("fused_mlp", "fc2 weight [3, 7]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                fused_mlp(zeros({2, 4}), zeros({6, 4}), Tensor(), zeros({3, 6}));
              }),
              names("fused_mlp", "fc1 bias none"));
}

TEST(BadInput, Matmul) {
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                matmul(zeros({2, 3}), zeros({4, 5}));
              }),
              names("matmul", "[2, 3]", "[4, 5]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                matmul(zeros({2, 3}), zeros({2, 5}), false, true);
              }),
              names("matmul", "[2, 3]", "[2, 5]^T"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                matmul(zeros({2, 3, 4}), zeros({3, 4, 5}));
              }),
              names("matmul", "[2, 3, 4]", "[3, 4, 5]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                matmul(zeros({2, 3}), zeros({2, 3, 4}));
              }),
              names("matmul", "[2, 3]", "[2, 3, 4]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                matmul(zeros({3}), zeros({3, 1}));
              }),
              names("matmul", "[3]", "[3, 1]"));
}

TEST(BadInput, AddBroadcastOnlyOverTheLastDim) {
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                add(zeros({2, 3}), zeros({3, 2}));
              }),
              names("add", "[2, 3]", "[3, 2]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                add(zeros({2, 3}), zeros({2}));
              }),
              names("add", "[2, 3]", "[2]"));
}

TEST(BadInput, SameShapeBinaryOps) {
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  for (const auto& [name, op] :
       {std::pair<const char*, Binary>{"sub", sub}, std::pair<const char*, Binary>{"mul", mul},
        std::pair<const char*, Binary>{"mse_loss", mse_loss}}) {
    EXPECT_THAT(message_of<std::invalid_argument>([op = op] {
                  op(zeros({4, 2}), zeros({2, 4}));
                }),
                names(name, "[4, 2]", "[2, 4]"));
  }
}

TEST(BadInput, DtypeMismatch) {
  const Tensor f64 = Tensor::zeros({2}, DType::f64);
  EXPECT_THAT(message_of<std::invalid_argument>([&] { add(zeros({2}), f64); }),
              names("add", "float32", "float64"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                linear(zeros({1, 2}), zeros({3, 2}), Tensor::zeros({3}, DType::f64));
              }),
              names("linear", "float64"));
}

TEST(BadInput, SoftmaxAndMeanNeedElements) {
  EXPECT_THAT(message_of<std::invalid_argument>([] { softmax(zeros({})); }), names("softmax"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                mean(zeros({3, 0}));
              }),
              names("mean", "[3, 0]"));
}

TEST(BadInput, Reshape) {
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                reshape(zeros({2, 3}), {4, 2});
              }),
              names("reshape", "[2, 3]", "[4, 2]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                reshape(zeros({2, 3}), {-1, -1});
              }),
              names("reshape", "[2, 3]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                reshape(zeros({2, 3}), {4, -1});
              }),
              names("reshape", "[2, 3]", "[4, -1]"));
}

TEST(BadInput, DimsOutOfRange) {
  EXPECT_THAT(message_of<std::out_of_range>([] {
                transpose(zeros({2, 3}), 0, 2);
              }),
              names("transpose", "dim 2"));
  EXPECT_THAT(message_of<std::out_of_range>([] {
                narrow(zeros({2, 3}), 1, 2, 2);
              }),
              names("narrow", "[2, 4)", "[2, 3]"));
  EXPECT_THAT(message_of<std::out_of_range>([] {
                split(zeros({2, 3}), 2, -3);
              }),
              names("split", "dim -3"));
}

TEST(BadInput, SplitAndConcat) {
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                split(zeros({2, 3}), 2, 1);
              }),
              names("split", "[2, 3]", "2 chunks"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                concat({zeros({2, 3}), zeros({3, 3})}, 1);
              }),
              names("concat", "[3, 3]", "[2, 3]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                concat({zeros({2, 3}), zeros({2})}, 0);
              }),
              names("concat", "[2]", "[2, 3]"));
  EXPECT_THAT(message_of<std::invalid_argument>([] { concat({}, 0); }), names("concat"));
}

TEST(BadInput, TensorFactoriesAndGradients) {
  EXPECT_THAT(message_of<std::invalid_argument>([] {
                Tensor::from_vector({1, 2, 3}, {2, 2});
              }),
              names("from_vector", "[2, 2]"));
  Tensor x = zeros({2, 3}).set_requires_grad();
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                scale(x, 2.0).backward(zeros({3, 2}));
              }),
              names("backward", "[2, 3]", "[3, 2]"));
  // A float64 seed for a float32 graph would otherwise leave a float64 gradient on x.
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                scale(x, 2.0).backward(Tensor::zeros({2, 3}, DType::f64));
              }),
              names("backward", "float32", "float64"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] { x.set_grad(zeros({6})); }),
              names("set_grad", "[2, 3]", "[6]"));
  EXPECT_THROW(scale(x, 2.0).set_requires_grad(), std::logic_error);  // not a leaf
}

}  // namespace
}  // namespace mpitron::test
