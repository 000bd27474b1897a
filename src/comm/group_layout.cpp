#include "comm/group_layout.h"

#include <climits>
#include <stdexcept>

#include "comm/errors.h"

namespace mpitron::comm {

std::string to_string(Axis axis) {
  switch (axis) {
    case Axis::tp:
      return "tp";
    case Axis::pp:
      return "pp";
    case Axis::dp:
      return "dp";
  }
  return "unknown axis";
}

namespace {

std::string sizes_text(int tp, int pp, int dp) {
  return "tp=" + std::to_string(tp) + ", pp=" + std::to_string(pp) + ", dp=" + std::to_string(dp);
}

// The coordinate of `c` along `axis`.
int& component(Coordinates& c, Axis axis) {
  return axis == Axis::tp ? c.t : axis == Axis::pp ? c.p : c.d;
}

void require_positive(int tp, int pp, int dp) {
  if (tp < 1 || pp < 1 || dp < 1) {
    throw ConfigError("tp, pp and dp must each be at least 1, got " + sizes_text(tp, pp, dp));
  }
}

}  // namespace

void validate_sizes(int tp, int pp, int dp, int world_size) {
  require_positive(tp, pp, dp);
  const long long product = static_cast<long long>(tp) * pp * dp;
  if (product != world_size) {
    throw ConfigError("tp*pp*dp = " + std::to_string(tp) + "*" + std::to_string(pp) + "*" +
                      std::to_string(dp) + " = " + std::to_string(product) +
                      ", but the world size is " + std::to_string(world_size));
  }
}

GroupLayout::GroupLayout(int tp, int pp, int dp) : tp_(tp), pp_(pp), dp_(dp) {
  require_positive(tp, pp, dp);
  if (static_cast<long long>(tp) * pp * dp > INT_MAX) {
    throw ConfigError("tp*pp*dp does not fit an MPI rank: " + sizes_text(tp, pp, dp));
  }
}

int GroupLayout::size(Axis axis) const {
  switch (axis) {
    case Axis::tp:
      return tp_;
    case Axis::pp:
      return pp_;
    case Axis::dp:
      return dp_;
  }
  return 0;
}

Coordinates GroupLayout::coordinates(int rank) const {
  if (rank < 0 || rank >= world_size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is outside a world of " +
                            std::to_string(world_size()) + " ranks");
  }
  return {rank % tp_, (rank / tp_) % pp_, rank / (tp_ * pp_)};
}

int GroupLayout::rank_of(Coordinates c) const {
  if (c.t < 0 || c.t >= tp_ || c.p < 0 || c.p >= pp_ || c.d < 0 || c.d >= dp_) {
    throw std::out_of_range("coordinates t=" + std::to_string(c.t) + ", p=" + std::to_string(c.p) +
                            ", d=" + std::to_string(c.d) + " are outside " +
                            sizes_text(tp_, pp_, dp_));
  }
  return c.d * (pp_ * tp_) + c.p * tp_ + c.t;
}

int GroupLayout::coordinate(Axis axis, int rank) const {
  Coordinates c = coordinates(rank);
  return component(c, axis);
}

SplitKey GroupLayout::split(Axis axis, int rank) const {
  const Coordinates c = coordinates(rank);
  switch (axis) {
    case Axis::tp:
      return {c.d * pp_ + c.p, c.t};
    case Axis::pp:
      return {c.d * tp_ + c.t, c.p};
    case Axis::dp:
      return {c.p * tp_ + c.t, c.d};
  }
  return {};
}

std::vector<int> GroupLayout::group(Axis axis, int rank) const {
  const Coordinates base = coordinates(rank);
  std::vector<int> ranks;
  for (int i = 0; i < size(axis); ++i) {
    Coordinates c = base;
    component(c, axis) = i;
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

std::optional<SplitKey> GroupLayout::embedding_split(int rank) const {
  const Coordinates c = coordinates(rank);
  if (c.p != 0 && c.p != pp_ - 1) return std::nullopt;
  return SplitKey{c.d * tp_ + c.t, c.p};
}

std::vector<int> GroupLayout::embedding_group(int rank) const {
  const Coordinates c = coordinates(rank);
  if (c.p != 0 && c.p != pp_ - 1) return {};
  std::vector<int> ranks{rank_of({c.t, 0, c.d})};
  if (pp_ > 1) ranks.push_back(rank_of({c.t, pp_ - 1, c.d}));
  return ranks;
}

int GroupLayout::previous_stage(int rank) const {
  Coordinates c = coordinates(rank);
  if (c.p == 0) return -1;
  --c.p;
  return rank_of(c);
}

int GroupLayout::next_stage(int rank) const {
  Coordinates c = coordinates(rank);
  if (c.p == pp_ - 1) return -1;
  ++c.p;
  return rank_of(c);
}

}  // namespace mpitron::comm
