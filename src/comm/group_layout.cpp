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
    case Axis::cp:
      return "cp";
  }
  return "unknown axis";
}

namespace {

// "tp=2, pp=1, dp=2", with ", cp=2" when cp > 1.
std::string sizes_text(int tp, int pp, int dp, int cp) {
  std::string text =
      "tp=" + std::to_string(tp) + ", pp=" + std::to_string(pp) + ", dp=" + std::to_string(dp);
  return cp == 1 ? text : text + ", cp=" + std::to_string(cp);
}

// The coordinate of `c` along `axis`.
int& component(Coordinates& c, Axis axis) {
  switch (axis) {
    case Axis::tp:
      return c.t;
    case Axis::pp:
      return c.p;
    case Axis::dp:
      return c.d;
    case Axis::cp:
      break;
  }
  return c.c;
}

void require_positive(int tp, int pp, int dp, int cp) {
  if (tp < 1 || pp < 1 || dp < 1 || cp < 1) {
    throw ConfigError(std::string(cp == 1 ? "tp, pp and dp" : "tp, pp, dp and cp") +
                      " must each be at least 1, got " + sizes_text(tp, pp, dp, cp));
  }
}

}  // namespace

void validate_sizes(int tp, int pp, int dp, int world_size, int cp) {
  require_positive(tp, pp, dp, cp);
  const long long product = static_cast<long long>(tp) * cp * pp * dp;
  if (product != world_size) {
    const std::string factors =
        cp == 1 ? "tp*pp*dp = " + std::to_string(tp) + "*"
                : "tp*cp*pp*dp = " + std::to_string(tp) + "*" + std::to_string(cp) + "*";
    throw ConfigError(factors + std::to_string(pp) + "*" + std::to_string(dp) + " = " +
                      std::to_string(product) + ", but the world size is " +
                      std::to_string(world_size));
  }
}

GroupLayout::GroupLayout(int tp, int pp, int dp, int cp) : tp_(tp), pp_(pp), dp_(dp), cp_(cp) {
  require_positive(tp, pp, dp, cp);
  if (static_cast<long long>(tp) * cp * pp * dp > INT_MAX) {
    throw ConfigError("tp*cp*pp*dp does not fit an MPI rank: " + sizes_text(tp, pp, dp, cp));
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
    case Axis::cp:
      return cp_;
  }
  return 0;
}

Coordinates GroupLayout::coordinates(int rank) const {
  if (rank < 0 || rank >= world_size()) {
    throw std::out_of_range("rank " + std::to_string(rank) + " is outside a world of " +
                            std::to_string(world_size()) + " ranks");
  }
  const int inner = tp_ * cp_;
  return {rank % tp_, (rank / inner) % pp_, rank / (inner * pp_), (rank / tp_) % cp_};
}

int GroupLayout::rank_of(Coordinates c) const {
  if (c.t < 0 || c.t >= tp_ || c.p < 0 || c.p >= pp_ || c.d < 0 || c.d >= dp_ || c.c < 0 ||
      c.c >= cp_) {
    throw std::out_of_range("coordinates t=" + std::to_string(c.t) + ", p=" + std::to_string(c.p) +
                            ", d=" + std::to_string(c.d) + ", c=" + std::to_string(c.c) +
                            " are outside " + sizes_text(tp_, pp_, dp_, cp_));
  }
  return c.d * (pp_ * cp_ * tp_) + c.p * (cp_ * tp_) + c.c * tp_ + c.t;
}

int GroupLayout::coordinate(Axis axis, int rank) const {
  Coordinates c = coordinates(rank);
  return component(c, axis);
}

SplitKey GroupLayout::split(Axis axis, int rank) const {
  const Coordinates c = coordinates(rank);
  switch (axis) {
    case Axis::tp:
      return {(c.d * pp_ + c.p) * cp_ + c.c, c.t};
    case Axis::pp:
      return {(c.d * cp_ + c.c) * tp_ + c.t, c.p};
    case Axis::dp:
      return {(c.p * cp_ + c.c) * tp_ + c.t, c.d};
    case Axis::cp:
      return {(c.d * pp_ + c.p) * tp_ + c.t, c.c};
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

SplitKey GroupLayout::dp_cp_split(int rank) const {
  const Coordinates c = coordinates(rank);
  return {c.p * tp_ + c.t, c.d * cp_ + c.c};
}

std::vector<int> GroupLayout::dp_cp_group(int rank) const {
  const Coordinates base = coordinates(rank);
  std::vector<int> ranks;
  for (int d = 0; d < dp_; ++d) {
    for (int c = 0; c < cp_; ++c)
      ranks.push_back(rank_of({base.t, base.p, d, c}));
  }
  return ranks;
}

std::optional<SplitKey> GroupLayout::embedding_split(int rank) const {
  const Coordinates c = coordinates(rank);
  if (c.p != 0 && c.p != pp_ - 1) return std::nullopt;
  return SplitKey{(c.d * cp_ + c.c) * tp_ + c.t, c.p};
}

std::vector<int> GroupLayout::embedding_group(int rank) const {
  const Coordinates c = coordinates(rank);
  if (c.p != 0 && c.p != pp_ - 1) return {};
  std::vector<int> ranks{rank_of({c.t, 0, c.d, c.c})};
  if (pp_ > 1) ranks.push_back(rank_of({c.t, pp_ - 1, c.d, c.c}));
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
