// Who had not arrived when a deadline passed (in the spirit of Horovod's stall inspector).
//
// While an operation waits (wait.h), the waiting rank answers "what are you doing?" queries on a
// side communicator (a duplicate of the world, so no user message can match them) with the text
// of its pending operation. When a deadline passes, the expiring rank asks the members it was
// waiting for, collects the answers for a short grace period, and names in its deadline line the
// ranks that are waiting in the same operation, the ones waiting in another one, and the ones
// that did not answer (computing, stuck outside mpitron's waits, or gone). Nothing is sent while
// operations complete in time: the only cost is one MPI_Iprobe per kStallAnswerEvery (wait.h)
// of an operation that is still pending.
#pragma once

#include <mpi.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mpitron::comm {

/// Uses `side` (a duplicate of MPI_COMM_WORLD; MPI_COMM_NULL switches inspection off) from now
/// on. Environment sets it after MPI_Init and clears it before MPI_Finalize.
void set_stall_inspection_comm(MPI_Comm side);

/// Answers every query that has arrived with `doing()` (this rank's pending operation, e.g.
/// "all_reduce on the tp communicator (64 bytes)"), which is called only when one has arrived, so
/// a poll without queries builds no text. Called by the wait routine every kStallAnswerEvery.
void answer_stall_queries(const std::function<std::string()>& doing);

/// Asks each of `peers` (world ranks, not this one) what it is doing and waits up to
/// `grace_seconds` for the answers, answering others' queries with `doing` meanwhile. Returns,
/// per peer, its answer or nullopt when it did not answer in time (or inspection is off).
std::vector<std::optional<std::string>> inspect_peers(const std::vector<int>& peers,
                                                      double grace_seconds, std::string_view doing);

/// Answers others' queries with `doing` for `seconds`, polling every millisecond: a rank that has
/// printed its deadline line goes on telling what it waited in.
void keep_answering(double seconds, std::string_view doing);

/// One clause for the deadline line from the answers of `peers` to a rank waiting in `doing`:
/// - a collective: "arrived: ranks 0, 2; not arrived: rank 1 (waiting in recv
///   from rank 3 on the pp communicator (8 bytes)), rank 3 (no answer: computing, stuck outside
///   mpitron's communication waits, or gone)" (`self`, this rank's world rank, counts as
///   arrived; "not arrived: none (every rank is inside it: one stopped progressing, ...)" when
///   every peer waits in `doing`);
/// - a point-to-point peer (`collective` false): "rank 1 is waiting in barrier on the world
///   communicator (0 bytes)" or "rank 1 did not answer (computing, ...)".
std::string stall_summary(int self, const std::vector<int>& peers,
                          const std::vector<std::optional<std::string>>& answers,
                          std::string_view doing, bool collective);

}  // namespace mpitron::comm
