// Shared helpers of the nn tests (multi-rank, linked with mpitron_mpi_test_main).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/tensor.h"
#include "comm/communicator.h"
#include "mpi_test_main.h"

namespace mpitron::nn {

/// The world communicator of this test job.
inline const comm::Communicator& test_world() {
  return mpi_test::world();
}

/// Element-wise |actual - expected| <= tolerance * max(1, |expected|) (a relative bound that
/// becomes absolute near zero); both tensors must be defined and of the same shape.
inline void expect_close(const autograd::Tensor& actual, const autograd::Tensor& expected,
                         double tolerance) {
  ASSERT_TRUE(actual.defined());
  ASSERT_TRUE(expected.defined());
  ASSERT_EQ(actual.shape(), expected.shape());
  const std::vector<double> a = actual.to_vector(), e = expected.to_vector();
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(std::abs(a[i] - e[i]), tolerance * std::max(1.0, std::abs(e[i])))
        << "element " << i << ": " << a[i] << " vs " << e[i];
  }
}

}  // namespace mpitron::nn
