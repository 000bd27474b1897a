// The rank layout of 3-D parallelism as a pure function of (tp, pp, dp): no MPI involved, so it
// is unit-tested for many shapes without launching processes.
//
// Layout: world rank = d*(pp*tp) + p*tp + t, i.e. the world viewed as an array [dp, pp, tp]
// (t varies fastest). Tensor-parallel groups are therefore neighbouring ranks.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mpitron::comm {

/// One parallel axis: tensor (tp), pipeline (pp) or data (dp).
enum class Axis { tp, pp, dp };

/// "tp" / "pp" / "dp".
std::string to_string(Axis axis);

/// A rank's position: t in [0, tp), p in [0, pp), d in [0, dp).
struct Coordinates {
  int t = 0;
  int p = 0;
  int d = 0;
  bool operator==(const Coordinates&) const = default;
};

/// Arguments of MPI_Comm_split for one axis: ranks with equal `color` form one group, ordered by
/// `key`.
struct SplitKey {
  int color = 0;
  int key = 0;
  bool operator==(const SplitKey&) const = default;
};

/// Checks that tp, pp and dp are each >= 1 and that tp*pp*dp == world_size.
/// Throws ConfigError with one line naming the numbers, e.g.
/// "tp*pp*dp = 2*2*2 = 8, but the world size is 4".
void validate_sizes(int tp, int pp, int dp, int world_size);

/// The group structure of a (tp, pp, dp) world of tp*pp*dp ranks.
class GroupLayout {
 public:
  /// Throws ConfigError when any size is < 1 or the product overflows an int.
  GroupLayout(int tp, int pp, int dp);

  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return dp_; }
  int world_size() const { return tp_ * pp_ * dp_; }

  /// Number of ranks in one group of `axis` (tp, pp or dp).
  int size(Axis axis) const;

  /// The coordinates of world rank `rank`; throws std::out_of_range outside [0, world_size).
  Coordinates coordinates(int rank) const;

  /// The world rank d*(pp*tp) + p*tp + t; throws std::out_of_range for coordinates outside the
  /// sizes.
  int rank_of(Coordinates c) const;

  /// The coordinate of `rank` along `axis` (t, p or d), which is also its rank inside that group.
  int coordinate(Axis axis, int rank) const;

  /// MPI_Comm_split arguments of `rank` for `axis`: TP color d*pp + p, key t; PP color d*tp + t,
  /// key p; DP color p*tp + t, key d.
  SplitKey split(Axis axis, int rank) const;

  /// World ranks of the `axis` group containing `rank`, in group-rank order ([size(axis)]).
  std::vector<int> group(Axis axis, int rank) const;

  /// MPI_Comm_split arguments of `rank` for the embedding group (Megatron-LM's): the first and
  /// the last stage of its pipeline, {(t, 0, d), (t, pp - 1, d)}, which hold the tied token
  /// embedding; color d*tp + t, key p. std::nullopt on a middle stage (no member of any group).
  /// With pp == 1 the group is the rank alone.
  std::optional<SplitKey> embedding_split(int rank) const;

  /// World ranks of the embedding group of `rank` in group-rank order: [2] when pp > 1, [1] (the
  /// rank itself) when pp == 1, empty on a middle stage.
  std::vector<int> embedding_group(int rank) const;

  /// World rank of the previous pipeline stage of `rank` (same t and d, p - 1), or -1 on the
  /// first stage.
  int previous_stage(int rank) const;

  /// World rank of the next pipeline stage of `rank` (same t and d, p + 1), or -1 on the last
  /// stage.
  int next_stage(int rank) const;

 private:
  int tp_;
  int pp_;
  int dp_;
};

}  // namespace mpitron::comm
