// Shared helpers of the nn tests (multi-rank, linked with mpitron_mpi_test_main): the test world
// and the tests/support helpers they use.
#pragma once

#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "mpi_test_main.h"
#include "support/compare.h"
#include "support/device_dtype.h"
#include "support/golden_file.h"

namespace mpitron::nn {

/// The world communicator of this test job.
inline const comm::Communicator& test_world() {
  return mpi_test::world();
}

using test::DeviceDtypeTest;
using test::expect_close;
using test::GoldenFile;

}  // namespace mpitron::nn
