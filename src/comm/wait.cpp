#include "comm/wait.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <sstream>
#include <thread>

#include "comm/agreement.h"
#include "comm/errors.h"
#include "comm/guard.h"
#include "comm/mpi_progress.h"
#include "comm/stall_inspector.h"

namespace mpitron::comm {

Backoff::Backoff(std::size_t bytes, std::chrono::steady_clock::time_point start)
    : start_(start),
      yield_for_(std::max(kYieldFor, std::chrono::nanoseconds(static_cast<std::int64_t>(
                                         static_cast<double>(bytes) * kYieldPerByte)))) {}

std::chrono::nanoseconds Backoff::next(std::chrono::nanoseconds waited,
                                       std::chrono::nanoseconds yield_for) {
  if (waited < yield_for) return std::chrono::nanoseconds{0};
  return std::clamp(waited / 16, kFirstSleep, kMaxSleep);
}

void Backoff::pause(std::chrono::steady_clock::time_point now) {
  const std::chrono::nanoseconds waited = now - start_;
  if (spins(waited)) return;
  const std::chrono::nanoseconds duration = next(waited, yield_for_);
  if (duration.count() == 0) {
    if (!mpi_yields_when_idle()) sched_yield();
  } else {
    std::this_thread::sleep_for(duration);
  }
}

DeadlineReport deadline_report(const Communicator& comm, const Operation& op) {
  DeadlineReport report;
  report.rank = comm.world_rank();
  report.what = op.what;
  report.peer = op.peer >= 0 ? comm.global_rank(op.peer) : -1;
  report.communicator = comm.name();
  report.members = comm.members();
  report.bytes = op.bytes;
  report.seconds = comm.timeout();
  return report;
}

std::string deadline_message(const DeadlineReport& report) {
  constexpr std::size_t kMaxListed = 16;
  std::ostringstream line;
  line << "rank " << report.rank << ": " << report.what;
  if (report.peer >= 0) line << " rank " << report.peer;
  line << " on the " << report.communicator << " communicator";
  if (report.peer < 0) {
    line << " of ranks " << rank_list(report.members, kMaxListed);
  }
  line << " (" << report.bytes << " bytes) did not complete within " << report.seconds << " s";
  if (!report.stalled.empty()) line << "; " << report.stalled;
  return line.str();
}

namespace {

double g_wait_seconds = 0.0;

// Adds the time from `start` to its destruction (however wait_all returns) to g_wait_seconds.
class WaitClock {
 public:
  explicit WaitClock(std::chrono::steady_clock::time_point start) : start_(start) {}
  ~WaitClock() {
    g_wait_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  WaitClock(const WaitClock&) = delete;
  WaitClock& operator=(const WaitClock&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

// How long an expired rank collects the answers of the ranks it waited for.
constexpr double kStallGraceSeconds = 2.0;
// How many grace periods an expired rank whose peers all answered waits before it ends the job.
constexpr double kIndirectGraces = 2.0;

// What this rank waits for, as other ranks' stall inspections see it: "all_reduce on the tp
// communicator (64 bytes)", "recv from rank 3 on the pp communicator (8 bytes)" (world ranks).
std::string operation_text(const Communicator& comm, const Operation& op) {
  std::ostringstream text;
  text << op.what;
  if (op.peer >= 0) text << " rank " << comm.global_rank(op.peer);
  text << " on the " << comm.name() << " communicator (" << op.bytes << " bytes)";
  return text.str();
}

[[noreturn]] void expire(const Communicator& comm, const Operation& op, const std::string& doing) {
  DeadlineReport report = deadline_report(comm, op);
  std::vector<int> peers;
  if (report.peer >= 0) {
    peers.push_back(report.peer);
  } else {
    std::copy_if(report.members.begin(), report.members.end(), std::back_inserter(peers),
                 [&](int r) { return r != report.rank; });
  }
  const double grace = std::min(kStallGraceSeconds, comm.timeout());
  const auto answers = inspect_peers(peers, grace, doing);
  report.stalled = stall_summary(report.rank, peers, answers, doing, report.peer < 0);
  const std::string line = deadline_message(report);
  if (std::any_of(answers.begin(), answers.end(), [](const auto& a) { return !a.has_value(); })) {
    abort_job(line, kDeadlineExitCode);
  }
  // Every peer answered, so each waits in turn for someone: a rank nearer the stall (whose peer,
  // a stopped process perhaps, cannot answer) may still be collecting its answers. Ending the job
  // now would hide its line, and Open MPI's abort continues a stopped process, which then answers
  // as if it had been waiting all along: print this line and leave that rank time to end the job.
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  keep_answering(kIndirectGraces * grace, doing);
  end_job(kDeadlineExitCode);
}

// Tests every pending request of `requests` once: true when none is pending any more; sets
// `progressed` when one completed. The status of a completion goes to `status` (one request's
// wait) or nowhere (MPI_STATUS_IGNORE).
bool test_all(const Communicator& comm, std::span<MPI_Request> requests, const Operation& op,
              bool& progressed, MPI_Status* status) {
  bool done = true;
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    int flag = 0;
    const int rc = MPI_Test(&request, &flag, status);
    if (rc != MPI_SUCCESS) {
      throw MpiError(
          "MPI_Test (" + std::string(op.what) + " on the " + comm.name() + " communicator)", rc);
    }
    done = done && flag != 0;
    progressed = progressed || flag != 0;
  }
  return done;
}

// The text of a pending operation for the stall inspector, built once another rank asks or the
// deadline passes.
class Doing {
 public:
  Doing(const Communicator& comm, const Operation& op) : comm_(comm), op_(op) {}
  const std::string& text() {
    if (text_.empty()) text_ = operation_text(comm_, op_);
    return text_;
  }

 private:
  const Communicator& comm_;
  const Operation& op_;
  std::string text_;
};

// wait_all, with the status of a single request's completion going to `status`.
void wait_requests(const Communicator& comm, std::span<MPI_Request> requests, const Operation& op,
                   MPI_Status* status) {
  if (std::all_of(requests.begin(), requests.end(),
                  [](MPI_Request request) { return request == MPI_REQUEST_NULL; })) {
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const WaitClock clock(start);
  bool progressed = false;
  if (test_all(comm, requests, op, progressed, status)) return;
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(comm.timeout()));
  Backoff backoff(op.bytes, start);
  Doing doing(comm, op);
  // Made once (one pointer: no allocation), not at every poll that answers stall queries.
  const std::function<std::string()> describe = [&doing] { return doing.text(); };
  auto answered = start;  // the last check for stall queries
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (progressed) backoff = Backoff(op.bytes, now);  // the pauses count from the last completion
    if (now - answered >= kStallAnswerEvery) {         // a short wait polls nothing else
      answer_stall_queries(describe);
      answered = now;
    }
    if (now >= deadline) expire(comm, op, doing.text());
    backoff.pause(now);
    progressed = false;
    if (test_all(comm, requests, op, progressed, status)) return;
  }
}

}  // namespace

void wait_all(const Communicator& comm, std::span<MPI_Request> requests, const Operation& op) {
  wait_requests(comm, requests, op, MPI_STATUS_IGNORE);
}

double wait_seconds() {
  return g_wait_seconds;
}

void add_wait_seconds(double seconds) {
  g_wait_seconds += seconds;
}

void wait_one(const Communicator& comm, MPI_Request& request, const Operation& op,
              MPI_Status* status) {
  wait_requests(comm, std::span<MPI_Request>(&request, 1), op, status);
}

}  // namespace mpitron::comm
