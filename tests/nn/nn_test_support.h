// What the nn tests (multi-rank, linked with mpitron_mpi_test_main) share: the test world
// (test::world()) and the tests/support helpers, all in namespace mpitron::test.
#pragma once

#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "mpi_test_main.h"
#include "support/compare.h"
#include "support/device_dtype.h"
#include "support/golden_file.h"
