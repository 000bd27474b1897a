// MPI's own blocking collectives under a deadline. Open MPI's non-blocking collectives (libnbc),
// which the wait routine (wait.h) could poll, took 1.2-3x the blocking calls' time (bench comm);
// where an algorithm table (algorithm_table.h) hands a collective to MPI, mpitron makes the
// blocking call and a watch thread enforces the deadline instead (communication layer internal).
#pragma once

#include <string_view>

#include "comm/communicator.h"
#include "comm/errors.h"
#include "comm/wait.h"

namespace mpitron::comm {

/// While alive, the calling thread is inside one blocking MPI call `op` on `comm` (both must
/// outlive it). A process-wide watch thread, started by the first WatchedCall, looks every
/// kWatchPeriodSeconds at the call in progress; when the same call has been seen for longer
/// than comm.timeout(), it prints deadline_message for it (the ranks are not asked what they
/// are doing: the watched rank cannot answer from inside MPI) to stderr and ends the process
/// with kDeadlineExitCode (std::_Exit: MPI's state belongs to the blocked call; the launcher
/// ends the other ranks). Arming and disarming are a few atomic stores, no system call, so a
/// call of a microsecond costs what the plain MPI call costs. The time inside counts as
/// wait_seconds(). Not reentrant; only the thread that calls MPI may use it.
class WatchedCall {
 public:
  static constexpr double kWatchPeriodSeconds = 0.1;

  WatchedCall(const Communicator& comm, const Operation& op);
  ~WatchedCall();
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;
};

/// Runs `call()`, one blocking MPI call returning an MPI error code, under a WatchedCall; throws
/// MpiError naming `name` when it fails.
template <class Call>
void blocking_call(const Communicator& comm, const Operation& op, std::string_view name,
                   Call&& call) {
  int code = 0;
  {
    const WatchedCall watched(comm, op);
    code = call();
  }
  check_mpi(code, name);
}

}  // namespace mpitron::comm
