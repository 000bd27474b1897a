#include "comm/topology.h"

namespace mpitron::comm {

namespace {

// Checks the sizes first, so a mismatch is reported before the layout is built or any
// collective is entered.
GroupLayout checked_layout(const Communicator& world, int tp, int pp, int dp, int cp) {
  validate_sizes(tp, pp, dp, world.size(), cp);
  return GroupLayout(tp, pp, dp, cp);
}

Communicator split_axis(const Communicator& world, const GroupLayout& layout, Axis axis) {
  const SplitKey key = layout.split(axis, world.rank());
  return world.split(key.color, key.key, to_string(axis));
}

// Named "dp" at cp 1, where it holds the dp group's ranks: its messages and traffic keep the name
// a 3-D run has always shown.
Communicator split_dp_cp(const Communicator& world, const GroupLayout& layout) {
  const SplitKey key = layout.dp_cp_split(world.rank());
  return world.split(key.color, key.key, layout.cp() == 1 ? "dp" : "dp_cp");
}

Communicator split_embedding(const Communicator& world, const GroupLayout& layout) {
  const std::optional<SplitKey> key = layout.embedding_split(world.rank());
  return world.split(key ? key->color : MPI_UNDEFINED, key ? key->key : 0, "embedding");
}

}  // namespace

ParallelTopology::ParallelTopology(const Communicator& world, int tp, int pp, int dp, int cp)
    : layout_(checked_layout(world, tp, pp, dp, cp)),
      coordinates_(layout_.coordinates(world.rank())),
      world_(world),
      tp_comm_(split_axis(world, layout_, Axis::tp)),
      pp_comm_(split_axis(world, layout_, Axis::pp)),
      dp_comm_(split_axis(world, layout_, Axis::dp)),
      cp_comm_(split_axis(world, layout_, Axis::cp)),
      dp_cp_comm_(split_dp_cp(world, layout_)),
      embedding_comm_(split_embedding(world, layout_)),
      prev_stage_(layout_.previous_stage(world.rank())),
      next_stage_(layout_.next_stage(world.rank())) {}

const Communicator& ParallelTopology::comm(Axis axis) const {
  switch (axis) {
    case Axis::tp:
      return tp_comm_;
    case Axis::pp:
      return pp_comm_;
    case Axis::dp:
      return dp_comm_;
    case Axis::cp:
      return cp_comm_;
  }
  return world_;
}

}  // namespace mpitron::comm
