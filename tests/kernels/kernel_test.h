// Shared fixture of the kernels tests: each test body runs for every (device, dtype) pair, with
// the CUDA pairs skipped when no CUDA device is visible.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::kernels::test {

struct Place {
  Device device;
  DType dtype;
};

std::string place_name(const ::testing::TestParamInfo<Place>& info);

/// Prints a Place as "cpu float32" in failure messages.
void PrintTo(const Place& place, std::ostream* os);

class KernelTest : public ::testing::TestWithParam<Place> {
 protected:
  void SetUp() override;

  Device device() const { return GetParam().device; }
  DType dtype() const { return GetParam().dtype; }

  /// Machine epsilon of the dtype under test (2^-23 or 2^-52).
  double eps() const;

  /// `values` rounded to the dtype under test, so references see exactly the kernel's inputs.
  std::vector<double> rounded(std::vector<double> values) const;

  /// `n` values uniform in [lo, hi), already rounded to the dtype; fixed seed per call site.
  std::vector<double> random(std::size_t n, unsigned seed, double lo = -2.0, double hi = 2.0) const;

  /// A buffer of the dtype under test on the device under test holding `values`.
  Buffer make(const std::vector<double>& values) const;

  /// An int32 or int64 buffer holding `values` on the device under test.
  Buffer make_indices(const std::vector<std::int64_t>& values, DType index_dtype) const;

  /// An uninitialized buffer of `n` elements on the device under test.
  Buffer empty(std::size_t n) const { return Buffer(n, dtype(), device()); }
};

/// Copies any buffer back to the host as doubles.
std::vector<double> read(const Buffer& buffer);

/// Expects |got[i] - want[i]| <= tol * max(1, |want[i]|) for every i, naming the first failures.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol);

}  // namespace mpitron::kernels::test

/// Runs `suite` (a KernelTest alias) on cpu and cuda, float32 and float64.
#define MPITRON_KERNEL_TEST_SUITE(suite)                                                  \
  INSTANTIATE_TEST_SUITE_P(                                                               \
      Places, suite,                                                                      \
      ::testing::Values(::mpitron::kernels::test::Place{::mpitron::kernels::Device::cpu,  \
                                                        ::mpitron::kernels::DType::f32},  \
                        ::mpitron::kernels::test::Place{::mpitron::kernels::Device::cpu,  \
                                                        ::mpitron::kernels::DType::f64},  \
                        ::mpitron::kernels::test::Place{::mpitron::kernels::Device::cuda, \
                                                        ::mpitron::kernels::DType::f32},  \
                        ::mpitron::kernels::test::Place{::mpitron::kernels::Device::cuda, \
                                                        ::mpitron::kernels::DType::f64}), \
      ::mpitron::kernels::test::place_name)
