#include "comm/blocking_call.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/guard.h"

namespace mpitron::comm {

namespace {

using Clock = std::chrono::steady_clock;

// The call in progress, written by the thread that calls MPI, read by the watch thread. `armed`
// is the call's sequence number (0: none); the other fields are written before it.
struct Watch {
  std::atomic<std::uint64_t> armed{0};
  std::atomic<const Communicator*> comm{nullptr};
  std::atomic<const Operation*> op{nullptr};
  std::atomic<double> timeout{0.0};
  // Set by the watch thread once it has decided to end the process: from then on the calling
  // thread does not return from a call, so the watch thread may read `comm` and `op`.
  std::atomic<bool> expiring{false};
  std::uint64_t last = 0;  // the calling thread's last sequence number
  Clock::time_point start;
};

[[noreturn]] void expire(const Communicator& comm, const Operation& op) {
  DeadlineReport report = deadline_report(comm, op);
  report.stalled =
      "it waited inside MPI's own blocking collective (chosen by the comm table), where no rank "
      "can be asked what it is doing";
  const std::string line = deadline_message(report);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  std::_Exit(kDeadlineExitCode);
}

void watch_calls(Watch& w) {
  std::uint64_t seen = 0;
  Clock::time_point since;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::duration<double>(WatchedCall::kWatchPeriodSeconds));
    const std::uint64_t call = w.armed.load(std::memory_order_acquire);
    const Clock::time_point now = Clock::now();
    if (call == 0 || call != seen) {
      seen = call;
      since = now;
      continue;
    }
    const double timeout = w.timeout.load(std::memory_order_acquire);
    if (w.armed.load(std::memory_order_seq_cst) != call ||
        now - since < std::chrono::duration<double>(timeout)) {
      continue;
    }
    w.expiring.store(true, std::memory_order_seq_cst);
    if (w.armed.load(std::memory_order_seq_cst) != call) {  // it returned just now
      w.expiring.store(false, std::memory_order_seq_cst);
      continue;
    }
    expire(*w.comm.load(), *w.op.load());
  }
}

Watch& watch() {
  // Never destroyed: the watch thread runs until the process ends.
  static Watch* const w = [] {
    auto* created = new Watch();
    std::thread(watch_calls, std::ref(*created)).detach();
    return created;
  }();
  return *w;
}

}  // namespace

WatchedCall::WatchedCall(const Communicator& comm, const Operation& op) {
  Watch& w = watch();
  w.comm.store(&comm, std::memory_order_relaxed);
  w.op.store(&op, std::memory_order_relaxed);
  w.timeout.store(comm.timeout(), std::memory_order_relaxed);
  w.start = Clock::now();
  w.armed.store(++w.last, std::memory_order_release);
}

WatchedCall::~WatchedCall() {
  Watch& w = watch();
  w.armed.store(0, std::memory_order_seq_cst);
  while (w.expiring.load(std::memory_order_seq_cst))
    sched_yield();  // the watch thread is ending the process, or takes its decision back
  add_wait_seconds(std::chrono::duration<double>(Clock::now() - w.start).count());
}

}  // namespace mpitron::comm
