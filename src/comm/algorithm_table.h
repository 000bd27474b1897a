// Which algorithm a collective runs: mpitron's own on point-to-point messages or MPI's own
// collective, per operation, group size and size. The built-in rule (the thresholds beside each
// algorithm: recursive_doubling.h, butterfly.h, ring_all_reduce.h, p2p_gather_scatter.h) was
// measured on one machine; `mpitron bench comm --tune-table` measures every choice on the machine
// it runs on and writes an AlgorithmTable, which a run installs at start-up
// (agree_on_algorithm_table: rank 0's file, broadcast, so every rank of a communicator takes the
// same algorithm). Where no table entry applies, the built-in rule chooses.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "kernels/device.h"

namespace mpitron::comm {

/// The collectives whose algorithm a table chooses.
enum class Collective { all_reduce, all_gather, reduce_scatter };

/// The algorithms. `mpi` is MPI's own blocking collective (MPI_Allreduce, MPI_Allgather,
/// MPI_Reduce_scatter_block) under the deadline watch (blocking_call.h); the others are
/// mpitron's: recursive_doubling (all-reduce: recursive_doubling.h; all-gather:
/// doubling_all_gather, butterfly.h), rabenseifner (all-reduce, butterfly.h), ring (all-reduce:
/// ring_all_reduce.h; all-gather and reduce-scatter: p2p_gather_scatter.h) and
/// recursive_halving (reduce-scatter, butterfly.h).
enum class Algorithm { mpi, recursive_doubling, rabenseifner, ring, recursive_halving };

/// "all-reduce", "all-gather", "reduce-scatter" (bench comm's names).
std::string_view to_string(Collective op);

/// "mpi", "recursive-doubling", "rabenseifner", "ring", "recursive-halving".
std::string_view to_string(Algorithm algorithm);

/// Every Collective, and the algorithms a table may choose for `op`, MPI's first:
/// all-reduce: mpi, recursive-doubling, rabenseifner, ring; all-gather: mpi,
/// recursive-doubling, ring; reduce-scatter: mpi, recursive-halving, ring.
inline constexpr Collective kCollectives[] = {Collective::all_reduce, Collective::all_gather,
                                              Collective::reduce_scatter};
std::span<const Algorithm> algorithms_for(Collective op);

/// True for the dtypes whose all-reduce may take mpitron's large-buffer algorithms (ring,
/// rabenseifner): float32, float64 and bfloat16 (combined in float32 and rounded once per
/// combination, bf16_reduction.h). Integer buffers keep MPI's reduction.
bool reduces_in_floating_point(kernels::DType dtype);

/// True when `algorithm` can run `op` on a group of `ranks` for a buffer of `numel` elements
/// (`floating`: reduces_in_floating_point of its dtype): recursive_doubling of all-gather,
/// rabenseifner and recursive_halving need a power-of-two group; rabenseifner and ring
/// all-reduce a floating buffer of at least `ranks` elements; mpi always.
bool applicable(Collective op, Algorithm algorithm, int ranks, std::size_t numel, bool floating);

/// One row of a table: `algorithm` runs `op` on groups of `ranks` ranks for sizes in
/// [from_bytes, below_bytes). The size is that of the whole buffer bench comm reports: the
/// all-reduce buffer, the gathered output of all-gather, the input of reduce-scatter.
struct AlgorithmChoice {
  Collective op = Collective::all_reduce;
  int ranks = 2;
  std::size_t from_bytes = 0;
  std::size_t below_bytes = std::numeric_limits<std::size_t>::max();
  Algorithm algorithm = Algorithm::mpi;
  bool operator==(const AlgorithmChoice&) const = default;
};

/// A measured choice of algorithms for one world size.
struct AlgorithmTable {
  int world_size = 0;
  std::string measured_on;  ///< free text: host, CPU, MPI library, date
  std::vector<AlgorithmChoice> choices;
  std::string source;  ///< where it was read from (a path), for messages; not written

  /// The algorithm of the first choice that covers (op, ranks, bytes), or nullopt.
  std::optional<Algorithm> lookup(Collective op, int ranks, std::size_t bytes) const;

  /// The JSON text bench comm --tune-table writes:
  /// {"mpitron_comm_table": 1, "world_size": W, "measured_on": "...", "choices": [{"op":
  /// "all-reduce", "ranks": 2, "from_bytes": 0, "below_bytes": 8192, "algorithm": "mpi"}, ...]}
  /// ("below_bytes" is left out for the last range, which has no end).
  std::string to_json() const;

  /// Parses to_json's format. Throws ConfigError naming the first problem: not JSON, not an
  /// object with "mpitron_comm_table": 1, a key the format does not have, a world_size below 1,
  /// a choice with an unknown op or algorithm, an algorithm that op does not have, ranks below 2
  /// or above world_size, from_bytes >= below_bytes, or sizes that overlap an earlier choice of
  /// the same op and ranks.
  static AlgorithmTable parse(std::string_view json_text);
};

/// What `mpitron bench comm --tune-table` measured for one (operation, group size, size): each
/// candidate's time per call.
struct AlgorithmTiming {
  Collective op = Collective::all_reduce;
  int ranks = 2;
  std::size_t bytes = 0;
  std::vector<Algorithm> algorithms;
  std::vector<double> seconds;  ///< per call, beside `algorithms`
};

/// mpitron's own algorithm is chosen only when it takes less than this share of MPI's time:
/// within the noise of a shared machine MPI's own call is the safer choice (its ratio to the
/// plain call is 1 by construction). At 0.97, a 4-rank tune on 2 cores chose an all-reduce at
/// 4 MiB that took 1.07-1.22x MPI's time in the runs after it (docs/performance.md).
inline constexpr double kOwnAlgorithmMargin = 0.90;

/// The choice for one timing: the fastest of mpitron's algorithms when it takes less than
/// kOwnAlgorithmMargin x MPI's time (or MPI's was not timed), else mpi.
Algorithm fastest(const AlgorithmTiming& timing);

/// A table's rows from `timings` (sizes ascending within each op and group size): each timed
/// size covers the sizes from the geometric mean with the previous one (from 0 for the first)
/// to the geometric mean with the next, and the last up to twice its size (the geometric mean
/// with the next size bench comm would time: beyond what was measured the built-in rule
/// chooses), with fastest()'s choice; neighbouring rows of the same algorithm are merged.
std::vector<AlgorithmChoice> choices_from(const std::vector<AlgorithmTiming>& timings);

/// The file's table: reads `path` and parses it (AlgorithmTable::parse), with `source` = path.
/// Throws ConfigError "cannot read ..." or parse's error.
AlgorithmTable read_algorithm_table(const std::string& path);

/// While alive, a table that makes `algorithm` run `op` on groups of `ranks` at every size is
/// the world family's (Communicator::set_algorithm_table); the family's previous table, or the
/// built-in rule, comes back when it is destroyed. Every rank of the family must force the same
/// choice. A choice the call cannot run (applicable) still takes the built-in rule.
class ForcedAlgorithm {
 public:
  ForcedAlgorithm(Communicator world, Collective op, int ranks, Algorithm algorithm);
  ~ForcedAlgorithm();
  ForcedAlgorithm(const ForcedAlgorithm&) = delete;
  ForcedAlgorithm& operator=(const ForcedAlgorithm&) = delete;

 private:
  Communicator world_;
  std::shared_ptr<const AlgorithmTable> saved_;
};

/// The environment variable that names a table when no --comm-table flag is given.
inline constexpr const char* kAlgorithmTableVariable = "MPITRON_COMM_TABLE";

/// Collective over `world` at start-up: rank 0 reads the table at `path` (`path` of the other
/// ranks is not used; empty on rank 0: no table) and broadcasts it, so every rank installs the
/// same table on the world communicator family (Communicator::set_algorithm_table). When rank 0
/// cannot read or parse it, every rank throws the same ConfigError "--comm-table PATH: <why>"
/// (or "MPITRON_COMM_TABLE PATH: ..." when `from_variable`). A table measured on another world
/// size is not installed: every rank returns the same note "comm table PATH was measured on a
/// world of W ranks, this one has N: the built-in rule chooses every algorithm"; otherwise it
/// returns "". Costs one broadcast of 8 bytes without a table.
std::string agree_on_algorithm_table(Communicator& world, const std::string& path,
                                     bool from_variable = false);

}  // namespace mpitron::comm
