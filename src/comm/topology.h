// 3-D parallelism on MPI: the world split into tensor-, pipeline- and data-parallel groups.
#pragma once

#include "comm/communicator.h"
#include "comm/group_layout.h"

namespace mpitron::comm {

/// Coordinates of this rank and its tp/pp/dp communicators, built once from the world.
///
/// World rank = d*(pp*tp) + p*tp + t (see GroupLayout). Groups come from MPI_Comm_split: TP color
/// d*pp + p key t, PP color d*tp + t key p, DP color p*tp + t key d, so this rank's rank inside
/// its tp/pp/dp communicator is t/p/d; the embedding group of the first and last stages is one
/// more split (GroupLayout::embedding_split). The communicators share the world's settings
/// (deadline, transfer mode).
class ParallelTopology {
 public:
  /// Collective over `world`. Before any collective call, every rank checks the sizes
  /// (validate_sizes) and throws the same ConfigError, e.g. "tp*pp*dp = 2*2*2 = 8, but the
  /// world size is 4", when they do not fit. Throws MpiError when a split fails.
  ParallelTopology(const Communicator& world, int tp, int pp, int dp);

  int tp() const { return layout_.tp(); }
  int pp() const { return layout_.pp(); }
  int dp() const { return layout_.dp(); }

  /// The pure layout this topology follows.
  const GroupLayout& layout() const { return layout_; }

  /// This rank's coordinates t, p, d (equal to its rank in tp_comm, pp_comm, dp_comm).
  int tp_rank() const { return coordinates_.t; }
  int pp_rank() const { return coordinates_.p; }
  int dp_rank() const { return coordinates_.d; }

  const Communicator& world() const { return world_; }
  const Communicator& tp_comm() const { return tp_comm_; }
  const Communicator& pp_comm() const { return pp_comm_; }
  const Communicator& dp_comm() const { return dp_comm_; }

  /// The embedding group (Megatron-LM): on a rank of the first or the last stage, the
  /// communicator of {(t, 0, d), (t, pp - 1, d)} named "embedding", of size 2 when pp > 1 and of
  /// this rank alone when pp == 1 (group rank 0 is the first stage); there the gradients of the
  /// token embedding tied between the first and the last stage are summed. On a middle stage an
  /// empty handle (valid() false).
  const Communicator& embedding_comm() const { return embedding_comm_; }

  /// The communicator of `axis`.
  const Communicator& comm(Axis axis) const;

  bool is_first_stage() const { return coordinates_.p == 0; }
  bool is_last_stage() const { return coordinates_.p == pp() - 1; }

  /// World rank of the previous / next pipeline stage (same t and d), or -1 on the first / last
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
  Communicator embedding_comm_;
  int prev_stage_ = -1;
  int next_stage_ = -1;
};

}  // namespace mpitron::comm
