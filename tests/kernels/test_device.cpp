// Buffer, the caching allocator, copies across devices and the CUDA availability queries.
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_support.h"
#include "kernels/cuda_module.h"

namespace mpitron::test {
using namespace ::mpitron::kernels;
namespace {

using DeviceTest = KernelTest;
MPITRON_KERNEL_TEST_SUITE(DeviceTest);

TEST_P(DeviceTest, BufferReportsItsShape) {
  const Buffer buffer = empty(10);
  EXPECT_EQ(buffer.numel(), 10u);
  EXPECT_EQ(buffer.bytes(), 10 * dtype_size(dtype()));
  EXPECT_EQ(buffer.dtype(), dtype());
  EXPECT_EQ(buffer.device(), device());
  EXPECT_NE(buffer.data(), nullptr);
  EXPECT_FALSE(buffer.empty());
}

TEST_P(DeviceTest, FreedBlockIsReusedForTheSameSize) {
  const void* first = nullptr;
  {
    const Buffer buffer = empty(12345);
    first = buffer.data();
  }
  const Buffer again = empty(12345);
  EXPECT_EQ(again.data(), first);
}

TEST_P(DeviceTest, MoveTransfersOwnership) {
  Buffer source = make({1, 2, 3});
  const void* data = source.data();
  Buffer moved = std::move(source);
  EXPECT_EQ(moved.data(), data);
  EXPECT_TRUE(source.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is API
  expect_close(host_values(moved), {1, 2, 3}, 0.0);
}

TEST_P(DeviceTest, CopiesRoundTripAcrossDevices) {
  const std::vector<double> values = random(333, 40);
  const Buffer original = make(values);
  for (Device other : {Device::cpu, Device::cuda}) {
    if (other == Device::cuda && !cuda_available()) continue;
    const Buffer there = original.to(other);
    EXPECT_EQ(there.device(), other);
    Buffer back = empty(values.size());
    copy(there, back);
    expect_close(host_values(back), values, 0.0);
  }
}

TEST_P(DeviceTest, CloneIsIndependent) {
  const Buffer original = make({1, 2});
  Buffer twin = original.clone();
  fill(twin, 9.0);
  expect_close(host_values(original), {1, 2}, 0.0);
  expect_close(host_values(twin), {9, 9}, 0.0);
}

TEST_P(DeviceTest, CopyBytesMovesASlice) {
  const Buffer src = make({1, 2, 3, 4});
  Buffer dst = make({0, 0, 0, 0, 0});
  const std::size_t width = dtype_size(dtype());
  copy_bytes(src, 1 * width, dst, 3 * width, 2 * width);
  expect_close(host_values(dst), {0, 0, 0, 2, 3}, 0.0);
  EXPECT_THROW(copy_bytes(src, 3 * width, dst, 0, 2 * width), std::out_of_range);
  EXPECT_THROW(copy_bytes(src, 0, dst, 4 * width, 2 * width), std::out_of_range);
}

TEST_P(DeviceTest, CopyRejectsMismatchedSizes) {
  const Buffer src = empty(6);
  Buffer dst = empty(5);
  try {
    copy(src, dst);
    FAIL() << "copy accepted 6 -> 5 elements";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("5"), std::string::npos) << e.what();
  }
}

TEST_P(DeviceTest, TypedAccessChecksTheDtype) {
  Buffer buffer = empty(1);  // data_as only checks the dtype, it never dereferences
  if (dtype() == DType::f32) {
    EXPECT_NO_THROW(buffer.data_as<float>());
    EXPECT_THROW(buffer.data_as<double>(), std::logic_error);
  } else {
    EXPECT_NO_THROW(buffer.data_as<double>());
    EXPECT_THROW(buffer.data_as<float>(), std::logic_error);
  }
}

TEST(Device, PinnedHostBufferIsHostMemory) {
  Buffer pinned = Buffer::pinned_host(4, DType::f32);
  EXPECT_EQ(pinned.device(), Device::cpu);
  EXPECT_EQ(pinned.pinned(), cuda_module_loaded());  // pinned once a cuda buffer exists
  fill(pinned, 1.5);
  EXPECT_EQ(pinned.data_as<float>()[3], 1.5f);
}

TEST(Device, CudaQueriesAgree) {
  EXPECT_GE(cuda_device_count(), 0);
  EXPECT_EQ(cuda_available(), cuda_device_count() > 0);
  if (!cuda_built()) {
    EXPECT_EQ(cuda_device_count(), 0);
  }
}

TEST(Device, CudaBufferWithoutCudaThrows) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(Buffer(4, DType::f32, Device::cuda), std::runtime_error);
  EXPECT_NO_THROW(synchronize(Device::cuda));
}

// The module's own check refuses a GPU older than Ampere (its kernels and bfloat16 need 8.0), in
// one line naming the capability; 8.0 and newer pass.
TEST(Device, CudaCapabilityBelowAmpereIsNamed) {
  for (const auto& [major, minor] : {std::pair{8, 0}, {8, 6}, {9, 0}, {12, 0}})
    EXPECT_EQ(cuda_capability_problem(major, minor), "") << major << "." << minor;
  EXPECT_EQ(cuda_capability_problem(7, 5),
            "GPU 0 has compute capability 7.5; mpitron's CUDA kernels and bfloat16 need 8.0 or "
            "above");
  EXPECT_NE(cuda_capability_problem(6, 1).find("capability 6.1;"), std::string::npos);
}

TEST(Device, NamesAndSizes) {
  EXPECT_EQ(to_string(Device::cpu), "cpu");
  EXPECT_EQ(to_string(Device::cuda), "cuda");
  EXPECT_EQ(to_string(DType::f32), "float32");
  EXPECT_EQ(to_string(DType::f64), "float64");
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
}

TEST(Device, CpuThreadsAreConfigurable) {
  const int before = cpu_threads();
  EXPECT_GE(before, 1);
  set_cpu_threads(2);
  EXPECT_EQ(cpu_threads(), 2);
  set_cpu_threads(before);
  EXPECT_THROW(set_cpu_threads(0), std::invalid_argument);
}

}  // namespace
}  // namespace mpitron::test
