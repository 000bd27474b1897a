#include "support/device_dtype.h"

namespace mpitron::test {

void PrintTo(const DeviceDtype& place, std::ostream* out) {
  *out << kernels::to_string(place.device) << " " << kernels::to_string(place.dtype);
}

std::string device_dtype_name(const ::testing::TestParamInfo<DeviceDtype>& info) {
  return kernels::to_string(info.param.device) + "_" + kernels::to_string(info.param.dtype);
}

bool device_missing(kernels::Device device) {
  return device == kernels::Device::cuda && !kernels::cuda_available();
}

void DeviceDtypeTest::SetUp() {
  if (device_missing(device())) GTEST_SKIP() << "no CUDA device";
}

}  // namespace mpitron::test
