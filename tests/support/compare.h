// Buffers from values and back to the host, and element-wise comparison with a stated tolerance.
#pragma once

#include <vector>

#include "autograd/tensor.h"
#include "kernels/device.h"

namespace mpitron::test {

/// A buffer of `dtype` on `device` holding `values` (converted to the element type: rounded to
/// float32 for f32, truncated for the integer dtypes).
kernels::Buffer make_buffer(const std::vector<double>& values, kernels::DType dtype,
                            kernels::Device device);

/// The elements of `buffer`, copied to the host, as doubles.
std::vector<double> host_values(const kernels::Buffer& buffer);

/// Expects |got[i] - want[i]| <= tolerance * max(1, |want[i]|) for every i (a relative bound that
/// becomes absolute near zero) and equal sizes; reports the first five failing elements.
void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  double tolerance);

/// The same for two defined tensors of equal shape (any device and dtype).
void expect_close(const autograd::Tensor& got, const autograd::Tensor& want, double tolerance);

}  // namespace mpitron::test
