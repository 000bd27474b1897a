// The one routine every blocking operation waits through: non-blocking MPI requests polled with
// MPI_Test, yielding the CPU between polls, until they complete or the communicator's deadline
// passes (then one line is printed and the job aborts, so a missing rank never hangs the job).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"

namespace mpitron::comm {

/// What a blocking operation is, for the deadline message.
struct Operation {
  std::string_view what;  ///< "all_reduce", "send to", "recv from", ...
  int peer = -1;          ///< rank of the other side inside the communicator; -1 for collectives
  std::size_t bytes = 0;  ///< payload size in bytes
};

/// Waits until every request in `requests` has completed (each becomes MPI_REQUEST_NULL).
/// Polls with MPI_Test, pausing per `Backoff` between rounds (counted from the
/// last round in which a request completed, so the rest of a transfer that is progressing is not
/// slept through: a 16 MiB ring all_reduce on 2 ranks 1.00 -> 0.89 of MPI_Allreduce's time, median
/// of 5) and answering other ranks' stall queries every kStallAnswerEvery while the operation is
/// pending, so a short wait makes no other MPI call (4 KiB all_gather on 4 ranks sharing 2 cores
/// 12.3 -> 10.5 us, reduce_scatter 12.9 -> 11.0 us, when it answered at every poll after 20 us;
/// answering is an MPI_Iprobe, which also yields the core when MPI yields when idle, so at
/// every poll it doubled a waiting rank's yields; one MPI_Testsome
/// per poll instead of MPI_Test per request was as fast there but made the pieces of a 16 MiB
/// all_reduce on 2 ranks 1.4x slower). Returns at once when no request is pending; the first
/// poll comes before the deadline and the pauses are set up, so a wait that it completes costs
/// one poll and two clock reads (every later poll reads the clock once). When
/// `comm.timeout()` seconds pass first, asks the peer (point-to-point) or the other members
/// (collective) what they are doing for up to min(2 s, timeout) (stall_inspector.h), prints
/// `deadline_message(...)` with their answers to stderr and calls MPI_Abort(MPI_COMM_WORLD,
/// kDeadlineExitCode); it does not return then. When every peer answered (each waits for
/// someone else), it first goes on answering queries for twice that grace, so that the line of a
/// rank whose peer did not answer (nearer the stall) is printed and that rank ends the job. Throws
/// MpiError when a request fails.
void wait_all(const Communicator& comm, std::span<MPI_Request> requests, const Operation& op);

/// How often a waiting rank checks for other ranks' stall queries (stall_inspector.h): far
/// within the 2 s an expired rank waits for the answers.
inline constexpr std::chrono::nanoseconds kStallAnswerEvery{100000};

/// Seconds this process has spent inside wait_all / wait_one since it started (the time its
/// communication kept it waiting: transfers, and peers that had not arrived yet).
double wait_seconds();

/// Adds `seconds` to wait_seconds(): time spent waiting outside wait_all (blocking_call.h).
void add_wait_seconds(double seconds);

/// `wait_all` for one request; its completion status goes to `status` (MPI_STATUS_IGNORE: not
/// kept; a request already null leaves it as it was).
void wait_one(const Communicator& comm, MPI_Request& request, const Operation& op,
              MPI_Status* status = MPI_STATUS_IGNORE);

/// The pauses between polls of a waiting rank (wait_all restarts them whenever a request
/// completes). For the first `kSpinFor` there is no pause, so a wait busies the CPU for at most
/// 20 us per completed request: a message from a peer that is already sending arrives within a
/// few microseconds, and a sched_yield (about 0.3 us, or a whole time slice when another process
/// is runnable) would delay seeing it (measured on 2 cores: a 4 KiB all_reduce 3.0 -> 2.5 us on
/// 2 ranks and 19 -> 12-15 us on 4 ranks, all_gather 2.0 -> 1.7 and 28 -> 16-19 us; no change
/// at 64 KiB). Ranks share few cores, so waiting never spins longer: until `kYieldFor` every
/// pause is a sched_yield (zero duration), so an operation that completes within it is seen at
/// once (Open MPI progresses transfers only inside MPI calls, so a sleeping poller also stalls
/// the transfer); a wait on a large transfer yields longer (kYieldPerByte). When the MPI library
/// already yields in every progress call that finds nothing to do (mpi_yields_when_idle), these
/// pauses are nothing: a second yield per poll gave the core away between the steps of a
/// rendezvous (send/recv of 256 KiB on 4 ranks sharing 2 cores, bench comm: 1.13-1.51 -> 1.02-1.12
/// of MPI_Send/MPI_Recv's time, three runs each; no change on 2 ranks). After that the
/// pause is a sleep of 1/16 of the time waited so far, between
/// kFirstSleep and kMaxSleep: a late completion is noticed at most ~6 % (or 1 ms) late, and a
/// rank waiting long for a slow peer (a pipeline bubble, a straggler) costs nearly no CPU.
class Backoff {
 public:
  static constexpr std::chrono::nanoseconds kSpinFor{20000};
  static constexpr std::chrono::nanoseconds kYieldFor{1000000};
  static constexpr std::chrono::nanoseconds kFirstSleep{50000};
  static constexpr std::chrono::nanoseconds kMaxSleep{1000000};
  /// A wait for a transfer of B bytes yields for at least B x kYieldPerByte (1 GB/s) before it
  /// sleeps: a transfer that takes longer than kYieldFor while both sides work on it (a 16 MiB
  /// message takes about 1.4 ms on 2 Zen 4 cores) is then not overslept by up to a sixteenth of
  /// its time (send/recv of 16 MiB on 2 ranks, median of 15 interleaved rounds: 1.03 -> 1.00 of
  /// MPI_Send/MPI_Recv's time).
  static constexpr double kYieldPerByte = 1.0;

  /// A Backoff for a wait on transfers of `bytes` in all (see kYieldPerByte) that began at
  /// `start`.
  explicit Backoff(std::size_t bytes = 0,
                   std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now());

  /// How long this Backoff yields before it sleeps: max(kYieldFor, bytes x kYieldPerByte ns).
  std::chrono::nanoseconds yield_for() const { return yield_for_; }

  /// True when a wait of `waited` so far polls again at once (waited < kSpinFor).
  static bool spins(std::chrono::nanoseconds waited) { return waited < kSpinFor; }

  /// The pause after `waited` of waiting once it no longer spins: zero (yield) while waited <
  /// `yield_for`, else a sleep duration.
  static std::chrono::nanoseconds next(std::chrono::nanoseconds waited,
                                       std::chrono::nanoseconds yield_for = kYieldFor);

  /// With `waited` = `now` - the Backoff's start (`now` the caller's clock reading, so a poll
  /// reads the clock once): returns at once while spins(waited), else yields (unless
  /// mpi_yields_when_idle()) or sleeps for next(waited, max(kYieldFor, bytes x kYieldPerByte)).
  void pause(std::chrono::steady_clock::time_point now);

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::nanoseconds yield_for_ = kYieldFor;
};

/// The facts of an expired deadline.
struct DeadlineReport {
  int rank = 0;                   ///< world rank of the waiting process
  std::string_view what;          ///< as in Operation
  int peer = -1;                  ///< world rank of the peer, or -1 for a collective
  std::string_view communicator;  ///< "world", "tp", "pp", "dp"
  std::vector<int> members;       ///< world ranks of the communicator (named for collectives)
  std::size_t bytes = 0;
  double seconds = 0.0;  ///< the deadline
  std::string stalled;   ///< stall_summary of the peers' answers (stall_inspector.h), or ""
};

/// The report of `op` on `comm` past its deadline (comm.timeout()), `stalled` empty.
DeadlineReport deadline_report(const Communicator& comm, const Operation& op);

/// One line, e.g. "rank 3: recv from rank 1 on the pp communicator (16384 bytes) did not
/// complete within 5 s" or "rank 0: all_reduce on the tp communicator of ranks 0, 1 (64 bytes)
/// did not complete within 120 s", followed by "; " and `stalled` when it is not empty, e.g.
/// "...within 120 s; arrived: ranks 0, 1; not arrived: rank 2 (no answer: ...)". At most 16
/// members are listed, then "...".
std::string deadline_message(const DeadlineReport& report);

}  // namespace mpitron::comm
