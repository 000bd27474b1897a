// Access to MPI from GoogleTest binaries linked with mpitron_mpi_test_main.
//
// That main starts MPI (comm::Environment), sets the deadline of every operation to
// MPITRON_TEST_TIMEOUT_SECONDS (default 30 s, well under the ctest TIMEOUT) so a rank that
// fails and skips a collective makes the job end instead of hang, runs the tests, prints every
// failed assertion with its rank, agrees on the outcome across ranks and returns 1 on every
// rank when any rank failed.
#pragma once

#include "comm/communicator.h"

namespace mpitron::test {

/// The world communicator of this test process.
comm::Communicator& world();

}  // namespace mpitron::test
