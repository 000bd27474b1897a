// Shared fixture of the kernels tests: each test body runs for every (device, dtype) pair of
// tests/support, with the CUDA pairs skipped when no CUDA device is visible.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/device.h"
#include "kernels/ops.h"
#include "support/compare.h"
#include "support/device_dtype.h"

namespace mpitron::test {

using kernels::Buffer;
using kernels::Device;
using kernels::DType;

class KernelTest : public DeviceDtypeTest {
 protected:
  /// Machine epsilon of the dtype under test (2^-23 or 2^-52).
  double eps() const;

  /// `values` rounded to the dtype under test, so references see exactly the kernel's inputs.
  std::vector<double> rounded(std::vector<double> values) const;

  /// `n` values uniform in [lo, hi), already rounded to the dtype; fixed seed per call site.
  std::vector<double> random(std::size_t n, unsigned seed, double lo = -2.0, double hi = 2.0) const;

  /// A buffer of the dtype under test on the device under test holding `values`.
  Buffer make(const std::vector<double>& values) const {
    return ::mpitron::test::make_buffer(values, dtype(), device());
  }

  /// An int32 or int64 buffer holding `values` on the device under test.
  Buffer make_indices(const std::vector<std::int64_t>& values, DType index_dtype) const;

  /// An uninitialized buffer of `n` elements on the device under test.
  Buffer empty(std::size_t n) const { return Buffer(n, dtype(), device()); }
};

}  // namespace mpitron::test

/// Runs `suite` (a KernelTest alias) on cpu and cuda, float64 and float32.
#define MPITRON_KERNEL_TEST_SUITE(suite)                                             \
  INSTANTIATE_TEST_SUITE_P(Places, suite, ::mpitron::test::all_devices_and_dtypes(), \
                           ::mpitron::test::device_dtype_name)
