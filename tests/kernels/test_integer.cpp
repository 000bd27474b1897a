// Integer buffers (token ids): allocation, copies across devices, fill and the layout ops are
// exact for values that no float type could carry; every arithmetic op rejects them by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

class IntegerBuffers : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    if (GetParam() == Device::cuda && !cuda_available()) GTEST_SKIP() << "no CUDA device";
  }

  template <class I>
  Buffer make(const std::vector<I>& values, DType dtype) const {
    Buffer host(values.size(), dtype, Device::cpu);
    std::copy(values.begin(), values.end(), host.data_as<I>());
    return host.to(GetParam());
  }

  template <class I>
  static std::vector<I> read(const Buffer& buffer) {
    const Buffer host = buffer.to(Device::cpu);
    const I* p = host.data_as<I>();
    return {p, p + host.numel()};
  }
};

// 2^53 + 1 and -2^62 - 1 do not survive a round trip through double; int32 extremes through float.
const std::vector<std::int64_t> kWide{
    (std::int64_t{1} << 53) + 1, -(std::int64_t{1} << 62) - 1, 0, 7, -1, INT64_MAX};
const std::vector<std::int32_t> kNarrow{INT32_MIN, INT32_MAX, 16777217, -3, 0, 5};

TEST_P(IntegerBuffers, CopiesRoundTripExactly) {
  const Buffer wide = make(kWide, DType::i64);
  EXPECT_EQ(wide.dtype(), DType::i64);
  EXPECT_EQ(wide.bytes(), kWide.size() * 8);
  EXPECT_EQ(read<std::int64_t>(wide), kWide);
  EXPECT_EQ(read<std::int64_t>(wide.clone()), kWide);
  const Buffer narrow = make(kNarrow, DType::i32);
  EXPECT_EQ(narrow.bytes(), kNarrow.size() * 4);
  Buffer back(kNarrow.size(), DType::i32, Device::cpu);
  copy(narrow, back);
  EXPECT_EQ(read<std::int32_t>(back), kNarrow);
}

TEST_P(IntegerBuffers, FillAndLayoutOpsMoveIntegersExactly) {
  Buffer filled(4, DType::i64, GetParam());
  fill(filled, 123456789012.0);
  EXPECT_EQ(read<std::int64_t>(filled), std::vector<std::int64_t>(4, 123456789012));

  // kWide as [2, 3] transposed to [3, 2].
  const Buffer x = make(kWide, DType::i64);
  Buffer y(6, DType::i64, GetParam());
  transpose(x, 1, 2, 1, 3, 1, y);
  EXPECT_EQ(read<std::int64_t>(y), (std::vector<std::int64_t>{kWide[0], kWide[3], kWide[1],
                                                              kWide[4], kWide[2], kWide[5]}));
  // Column 1 of kNarrow as [3, 2] into a zeroed [3].
  const Buffer n = make(kNarrow, DType::i32);
  Buffer column = make(std::vector<std::int32_t>(3, 0), DType::i32);
  copy_rows(n, 1, 2, column, 0, 1, 3, 1);
  EXPECT_EQ(read<std::int32_t>(column), (std::vector<std::int32_t>{INT32_MAX, -3, 5}));
}

INSTANTIATE_TEST_SUITE_P(Devices, IntegerBuffers, ::testing::Values(Device::cpu, Device::cuda),
                         [](const auto& info) { return to_string(info.param); });

TEST(IntegerDtypes, NamesSizesAndTypedAccess) {
  EXPECT_EQ(to_string(DType::i32), "int32");
  EXPECT_EQ(to_string(DType::i64), "int64");
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_TRUE(is_floating(DType::f32));
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_FALSE(is_floating(DType::i32));
  EXPECT_FALSE(is_floating(DType::i64));
  Buffer buffer(1, DType::i64, Device::cpu);
  EXPECT_NO_THROW(buffer.data_as<std::int64_t>());
  EXPECT_THROW(buffer.data_as<std::int32_t>(), std::logic_error);
  EXPECT_THROW(buffer.data_as<double>(), std::logic_error);
}

// Every arithmetic op names itself and the integer dtype instead of computing on the bits.
TEST(IntegerDtypes, ArithmeticOpsRejectIntegerBuffers) {
  for (DType dtype : {DType::i32, DType::i64}) {
    Buffer a(4, dtype, Device::cpu), b(4, dtype, Device::cpu), out(4, dtype, Device::cpu);
    Buffer one(1, dtype, Device::cpu);
    const std::vector<std::pair<std::string, std::function<void()>>> calls{
        {"broadcast_scalar", [&] { broadcast_scalar(one, 1.0, out); }},
        {"add", [&] { add(a, b, out); }},
        {"sub", [&] { sub(a, b, out); }},
        {"mul", [&] { mul(a, b, out); }},
        {"scale", [&] { scale(a, 2.0, out); }},
        {"axpy", [&] { axpy(1.0, a, out); }},
        {"bias_add", [&] { bias_add(a, b, 4, out); }},
        {"sum_rows", [&] { sum_rows(a, 4, out); }},
        {"sum", [&] { sum(a, one); }},
        {"gelu_forward", [&] { gelu_forward(a, out, GeluForm::exact); }},
        {"gelu_backward", [&] { gelu_backward(a, b, out, GeluForm::exact); }},
        {"softmax_forward", [&] { softmax_forward(a, 4, out); }},
        {"softmax_backward", [&] { softmax_backward(a, b, 4, out); }},
        {"mse_forward", [&] { mse_forward(a, b, one); }},
        {"mse_backward", [&] { mse_backward(a, b, one, out); }},
        {"gemm", [&] { gemm(false, false, 2, 2, 2, 1.0, a, b, 0.0, out); }},
        {"gemm_batched",
         [&] { gemm_batched(false, false, 1, 2, 2, 2, 1.0, a, 0, b, 0, 0.0, out, 0); }},
    };
    for (const auto& [op, call] : calls) {
      SCOPED_TRACE(op + " on " + to_string(dtype));
      try {
        call();
        ADD_FAILURE() << "accepted integer buffers";
      } catch (const std::invalid_argument& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("kernels::" + op + ":"), std::string::npos) << message;
        EXPECT_NE(message.find(to_string(dtype)), std::string::npos) << message;
      }
    }
  }
}

}  // namespace
}  // namespace mpitron::test
