// The CUDA module loader (kernels/cuda_module.h), in its own program because loading the module
// maps the CUDA runtime. Built only with the module. Without a GPU the module still loads (its
// symbols resolve) and its check reports the runtime's error; with one it yields a working backend.
#include <gtest/gtest.h>

#include <array>
#include <stdexcept>
#include <string>

#include "kernels/cuda_module.h"
#include "kernels/device.h"

namespace mpitron::kernels {
namespace {

TEST(CudaModule, IsInstalledBesideTheKernelsLibrary) {
  EXPECT_TRUE(cuda_module_installed());
  EXPECT_TRUE(cuda_built());
  EXPECT_FALSE(cuda_module_loaded());
}

TEST(CudaModule, LoadsWithAWorkingBackendOrTheRuntimeError) {
  if (!cuda_available()) {
    try {
      cuda_module_backend();
      FAIL() << "the CUDA runtime found a device that the driver probe did not";
    } catch (const std::runtime_error& e) {
      // Past dlopen and dlsym: the message is the module's own check.
      EXPECT_NE(std::string(e.what()).find("the CUDA runtime cannot use a device: "),
                std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(cuda_module_loaded());
    return;
  }
  Backend& cuda = cuda_module_backend();
  EXPECT_TRUE(cuda_module_loaded());
  const std::array<float, 4> in{1.0f, -2.0f, 3.5f, 0.25f};
  std::array<float, 4> out{};
  void* device = cuda.allocate(sizeof in);
  ASSERT_NE(device, nullptr);
  cuda.copy_bytes(device, in.data(), sizeof in);
  cuda.copy_bytes(out.data(), device, sizeof in);
  cuda.deallocate(device);
  EXPECT_EQ(out, in);
  EXPECT_TRUE(Buffer::pinned_host(4, DType::f32).pinned());
}

}  // namespace
}  // namespace mpitron::kernels
