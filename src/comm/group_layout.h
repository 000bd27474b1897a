// The rank layout of 4-D parallelism as a pure function of (tp, cp, pp, dp): no MPI involved, so
// it is unit-tested for many shapes without launching processes.
//
// Layout: world rank = d*(pp*cp*tp) + p*(cp*tp) + c*tp + t, i.e. the world viewed as an array
// [dp, pp, cp, tp] (t varies fastest; picotron's order). Tensor-parallel groups are therefore
// neighbouring ranks, and cp = 1 is the 3-D layout d*(pp*tp) + p*tp + t.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mpitron::comm {

/// One parallel axis: tensor (tp), pipeline (pp), data (dp) or context (cp: the sequence split
/// for ring attention, Liu et al. arXiv:2310.01889).
enum class Axis { tp, pp, dp, cp };

/// "tp" / "pp" / "dp" / "cp".
std::string to_string(Axis axis);

/// A rank's position: t in [0, tp), p in [0, pp), d in [0, dp), c in [0, cp).
struct Coordinates {
  int t = 0;
  int p = 0;
  int d = 0;
  int c = 0;
  bool operator==(const Coordinates&) const = default;
};

/// Arguments of MPI_Comm_split for one axis: ranks with equal `color` form one group, ordered by
/// `key`.
struct SplitKey {
  int color = 0;
  int key = 0;
  bool operator==(const SplitKey&) const = default;
};

/// Checks that tp, pp, dp and cp are each >= 1 and that tp*cp*pp*dp == world_size.
/// Throws ConfigError with one line naming the numbers, e.g.
/// "tp*pp*dp = 2*2*2 = 8, but the world size is 4" (cp == 1) or
/// "tp*cp*pp*dp = 1*3*1*1 = 3, but the world size is 4" (cp > 1).
void validate_sizes(int tp, int pp, int dp, int world_size, int cp = 1);

/// The group structure of a (tp, cp, pp, dp) world of tp*cp*pp*dp ranks.
class GroupLayout {
 public:
  /// Throws ConfigError when any size is < 1 or the product overflows an int.
  GroupLayout(int tp, int pp, int dp, int cp = 1);

  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return dp_; }
  int cp() const { return cp_; }
  int world_size() const { return tp_ * cp_ * pp_ * dp_; }

  /// Number of ranks in one group of `axis` (tp, pp, dp or cp).
  int size(Axis axis) const;

  /// The coordinates of world rank `rank`; throws std::out_of_range outside [0, world_size).
  Coordinates coordinates(int rank) const;

  /// The world rank d*(pp*cp*tp) + p*(cp*tp) + c*tp + t; throws std::out_of_range for coordinates
  /// outside the sizes.
  int rank_of(Coordinates c) const;

  /// The coordinate of `rank` along `axis` (t, p, d or c), which is also its rank inside that
  /// group.
  int coordinate(Axis axis, int rank) const;

  /// MPI_Comm_split arguments of `rank` for `axis`: TP color (d*pp + p)*cp + c, key t; PP color
  /// (d*cp + c)*tp + t, key p; DP color (p*cp + c)*tp + t, key d; CP color (d*pp + p)*tp + t,
  /// key c. With cp == 1 these are the 3-D colors d*pp + p, d*tp + t and p*tp + t.
  SplitKey split(Axis axis, int rank) const;

  /// World ranks of the `axis` group containing `rank`, in group-rank order ([size(axis)]).
  std::vector<int> group(Axis axis, int rank) const;

  /// MPI_Comm_split arguments of `rank` for the combined data-and-context group (the ranks that
  /// hold the same parameter shard: gradients are summed over it, Megatron-LM's dp-cp group):
  /// color p*tp + t, key d*cp + c. With cp == 1 this is the DP split.
  SplitKey dp_cp_split(int rank) const;

  /// World ranks of the dp×cp group of `rank` in group-rank order (key d*cp + c): [dp*cp].
  std::vector<int> dp_cp_group(int rank) const;

  /// MPI_Comm_split arguments of `rank` for the embedding group (Megatron-LM's): the first and
  /// the last stage of its pipeline, {(t, 0, d, c), (t, pp - 1, d, c)}, which hold the tied token
  /// embedding; color (d*cp + c)*tp + t, key p. std::nullopt on a middle stage (no member of any
  /// group). With pp == 1 the group is the rank alone.
  std::optional<SplitKey> embedding_split(int rank) const;

  /// World ranks of the embedding group of `rank` in group-rank order: [2] when pp > 1, [1] (the
  /// rank itself) when pp == 1, empty on a middle stage.
  std::vector<int> embedding_group(int rank) const;

  /// World rank of the previous pipeline stage of `rank` (same t, d and c, p - 1), or -1 on the
  /// first stage.
  int previous_stage(int rank) const;

  /// World rank of the next pipeline stage of `rank` (same t, d and c, p + 1), or -1 on the last
  /// stage.
  int next_stage(int rank) const;

 private:
  int tp_;
  int pp_;
  int dp_;
  int cp_;
};

}  // namespace mpitron::comm
