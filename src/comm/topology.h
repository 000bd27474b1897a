// 4-D parallelism on MPI: the world split into tensor-, context-, pipeline- and data-parallel
// groups.
#pragma once

#include "comm/communicator.h"
#include "comm/group_layout.h"

namespace mpitron::comm {

/// Coordinates of this rank and its tp/cp/pp/dp communicators, built once from the world.
///
/// World rank = d*(pp*cp*tp) + p*(cp*tp) + c*tp + t (see GroupLayout; cp == 1 is the 3-D layout
/// d*(pp*tp) + p*tp + t). Groups come from MPI_Comm_split with the keys of GroupLayout::split,
/// so this rank's rank inside its tp/cp/pp/dp communicator is t/c/p/d; the dp×cp group and the
/// embedding group of the first and last stages are two more splits (GroupLayout::dp_cp_split,
/// GroupLayout::embedding_split). The communicators share the world's settings (deadline,
/// transfer mode).
class ParallelTopology {
 public:
  /// Collective over `world`. Before any collective call, every rank checks the sizes
  /// (validate_sizes) and throws the same ConfigError, e.g. "tp*pp*dp = 2*2*2 = 8, but the
  /// world size is 4" or "tp*cp*pp*dp = 1*3*1*1 = 3, but the world size is 4", when they do not
  /// fit. Throws MpiError when a split fails.
  ParallelTopology(const Communicator& world, int tp, int pp, int dp, int cp = 1);

  int tp() const { return layout_.tp(); }
  int pp() const { return layout_.pp(); }
  int dp() const { return layout_.dp(); }
  int cp() const { return layout_.cp(); }

  /// The pure layout this topology follows.
  const GroupLayout& layout() const { return layout_; }

  /// This rank's coordinates t, p, d, c (equal to its rank in tp_comm, pp_comm, dp_comm,
  /// cp_comm).
  int tp_rank() const { return coordinates_.t; }
  int pp_rank() const { return coordinates_.p; }
  int dp_rank() const { return coordinates_.d; }
  int cp_rank() const { return coordinates_.c; }

  const Communicator& world() const { return world_; }
  const Communicator& tp_comm() const { return tp_comm_; }
  const Communicator& pp_comm() const { return pp_comm_; }
  const Communicator& dp_comm() const { return dp_comm_; }
  /// The context-parallel ring (named "cp"): the cp ranks that share t, p and d and hold the
  /// zigzag shards of one sequence; of this rank alone when cp == 1.
  const Communicator& cp_comm() const { return cp_comm_; }
  /// The combined data-and-context group (named "dp_cp", dp*cp ranks, group rank d*cp + c): the
  /// ranks holding the same parameter shard, over which gradients are averaged. When cp == 1 it
  /// has dp_comm's members and is named "dp" too.
  const Communicator& dp_cp_comm() const { return dp_cp_comm_; }

  /// The embedding group (Megatron-LM): on a rank of the first or the last stage, the
  /// communicator of {(t, 0, d), (t, pp - 1, d)} named "embedding", of size 2 when pp > 1 and of
  /// this rank alone when pp == 1 (group rank 0 is the first stage); there the gradients of the
  /// token embedding tied between the first and the last stage are summed. On a middle stage an
  /// empty handle (valid() false).
  const Communicator& embedding_comm() const { return embedding_comm_; }

  /// The communicator of `axis` (tp, pp, dp or cp).
  const Communicator& comm(Axis axis) const;

  bool is_first_stage() const { return coordinates_.p == 0; }
  bool is_last_stage() const { return coordinates_.p == pp() - 1; }

  /// World rank of the previous / next pipeline stage (same t, d and c), or -1 on the first / last
  /// stage. Inside pp_comm the same peers are pp_rank() - 1 and pp_rank() + 1.
  int prev_stage_global_rank() const { return prev_stage_; }
  int next_stage_global_rank() const { return next_stage_; }

 private:
  GroupLayout layout_;
  Coordinates coordinates_;
  Communicator world_;
  Communicator tp_comm_;
  Communicator pp_comm_;
  Communicator dp_comm_;
  Communicator cp_comm_;
  Communicator dp_cp_comm_;
  Communicator embedding_comm_;
  int prev_stage_ = -1;
  int next_stage_ = -1;
};

}  // namespace mpitron::comm
