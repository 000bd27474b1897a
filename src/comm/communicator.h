// A handle on one MPI communicator (world, or a tp/pp/dp group) plus the settings shared by a
// world and every communicator split from it: the deadline, the CUDA transfer mode and the
// message size limit.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mpitron::comm {

class Staging;
struct AlgorithmTable;

/// How CUDA buffers reach MPI. `staged` copies them through reused pinned host memory; `direct`
/// hands device pointers to a CUDA-aware MPI; `automatic` picks direct only when the MPI library
/// reports CUDA support and this rank is alone on its node (ranks sharing one GPU stay staged).
/// Results are identical in every mode.
enum class TransferMode { staged, direct, automatic };

/// This rank's place among the ranks of the job on its node (MPI_COMM_TYPE_SHARED).
struct NodeShare {
  int rank = 0;  ///< the local rank, 0 .. size-1
  int size = 1;  ///< ranks on this node
};

/// "staged" / "direct" / "auto".
std::string to_string(TransferMode mode);

/// Parses "staged", "direct" or "auto"; throws std::invalid_argument naming the text otherwise.
TransferMode parse_transfer_mode(std::string_view text);

/// A cheap, copyable handle on an MPI communicator. Copies share the communicator, which is
/// freed (MPI_Comm_free) when the last copy goes, unless MPI is already finalized. The world
/// handle comes from `Environment::world()`; groups come from `split`.
/// Errors of MPI calls on it are returned (MPI_ERRORS_RETURN) and raised as MpiError.
class Communicator {
 public:
  /// An empty handle; every accessor except `valid` throws std::logic_error.
  Communicator() = default;

  bool valid() const { return handle_ != nullptr; }

  /// This process's rank in the communicator, in [0, size()).
  int rank() const;
  int size() const;

  /// "world", "tp", "pp", "dp" (the name given to `split`), used in error messages.
  const std::string& name() const;

  /// The underlying MPI communicator.
  MPI_Comm native() const;

  /// World rank of the member whose rank here is `local_rank`; throws std::out_of_range outside
  /// [0, size()).
  int global_rank(int local_rank) const;

  /// World ranks of all members, in rank order ([size()]).
  const std::vector<int>& members() const;

  /// This process's world rank.
  int world_rank() const;

  /// Collective over this communicator: MPI_Comm_split by (`color`, `key`), returning the group
  /// this rank belongs to, named `name`. The new communicator shares this one's settings. A rank
  /// whose `color` is MPI_UNDEFINED joins no group and gets an empty handle (valid() false).
  /// Throws MpiError when MPI fails.
  Communicator split(int color, int key, std::string name) const;

  /// Deadline, in seconds, of every blocking operation on this communicator family (default
  /// 120 s).
  double timeout() const;

  /// Longest deadline accepted (about 11.6 days; longer ones would overflow the clock arithmetic).
  static constexpr double kMaxTimeoutSeconds = 1e6;

  /// Sets the deadline for this communicator, the communicator it was split from and every
  /// communicator split from either (the setting is shared). Throws std::invalid_argument unless
  /// 0 < `seconds` <= kMaxTimeoutSeconds (NaN included).
  void set_timeout(double seconds);

  TransferMode transfer_mode() const;

  /// This rank's local rank and the number of ranks on its node (the same for the family).
  NodeShare node() const;

  /// Sets the CUDA transfer mode for the family. Throws ConfigError for `direct` when the MPI
  /// library reports no CUDA support.
  void set_transfer_mode(TransferMode mode);

  /// Whether CUDA buffers are handed to MPI directly under the current mode.
  bool direct_transfers() const;

  /// True when the MPI library reports CUDA support at run time (MPIX_Query_cuda_support).
  bool mpi_cuda_aware() const;

  /// Most elements per MPI message (default INT_MAX); larger transfers are cut into several
  /// messages. Lowering it exercises that path in tests. Every rank must use the same value.
  std::size_t max_message_elements() const;

  /// Throws std::invalid_argument unless 1 <= `elements` <= INT_MAX.
  void set_max_message_elements(std::size_t elements);

  /// Whether host buffers are also copied through the staging workspaces, exactly as CUDA
  /// buffers are in staged mode (default false). It exists so machines without a GPU exercise
  /// the staging path; results are identical either way.
  bool stage_host_buffers() const;
  void set_stage_host_buffers(bool stage);

  /// The algorithm table of the family (algorithm_table.h), or nullptr for the built-in rule
  /// (the default). Every rank of the family must install the same table:
  /// agree_on_algorithm_table does that at start-up.
  const AlgorithmTable* algorithm_table() const;
  void set_algorithm_table(std::shared_ptr<const AlgorithmTable> table);

  /// The reused host staging buffers of the family (communication layer internal).
  Staging& staging() const;

 private:
  friend class Environment;
  struct Handle;
  struct Shared;

  /// Wraps `comm` (not freed) as "world" with fresh settings; used by Environment.
  static Communicator make_world(MPI_Comm comm, NodeShare node, bool mpi_cuda_aware);

  Communicator(std::shared_ptr<Handle> handle, std::shared_ptr<Shared> shared);
  const Handle& handle() const;
  Shared& shared() const;

  std::shared_ptr<Handle> handle_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace mpitron::comm
