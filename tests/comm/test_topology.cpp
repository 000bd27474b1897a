// ParallelTopology on the real world: every factorization tp*pp*dp of the world size (at 4
// ranks pp 1, 2 and 4; at 8 ranks this includes (2,2,2), (4,1,2), (1,4,2), (2,1,4), (1,1,8) and
// (8,1,1)) checked against the pure GroupLayout and against sums exchanged inside each group,
// the embedding group included; size errors on every rank.
#include <gtest/gtest.h>

#include <numeric>

#include "comm/collectives.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "comm_test_support.h"
#include "mpi_test_main.h"

namespace mpitron::test {
namespace {

using comm::Axis;
using test::world;

struct Sizes {
  int tp;
  int pp;
  int dp;
};

std::vector<Sizes> factorizations(int n) {
  std::vector<Sizes> all;
  for (int tp = 1; tp <= n; ++tp) {
    for (int pp = 1; tp * pp <= n; ++pp) {
      if (n % (tp * pp) == 0) all.push_back({tp, pp, n / (tp * pp)});
    }
  }
  return all;
}

TEST(Topology, EveryFactorizationMatchesTheLayoutAndCommunicates) {
  const int rank = world().rank();
  for (const Sizes& s : factorizations(world().size())) {
    SCOPED_TRACE("tp=" + std::to_string(s.tp) + " pp=" + std::to_string(s.pp) +
                 " dp=" + std::to_string(s.dp));
    const comm::ParallelTopology topology(world(), s.tp, s.pp, s.dp);
    // Coordinates from the defining formula rank = d*(pp*tp) + p*tp + t.
    const int t = rank % s.tp;
    const int p = (rank / s.tp) % s.pp;
    const int d = rank / (s.tp * s.pp);
    EXPECT_EQ(topology.tp_rank(), t);
    EXPECT_EQ(topology.pp_rank(), p);
    EXPECT_EQ(topology.dp_rank(), d);
    EXPECT_EQ(topology.is_first_stage(), p == 0);
    EXPECT_EQ(topology.is_last_stage(), p == s.pp - 1);
    EXPECT_EQ(topology.prev_stage_global_rank(), p == 0 ? -1 : rank - s.tp);
    EXPECT_EQ(topology.next_stage_global_rank(), p == s.pp - 1 ? -1 : rank + s.tp);
    for (Axis axis : {Axis::tp, Axis::pp, Axis::dp}) {
      const comm::Communicator& group = topology.comm(axis);
      const std::vector<int> members = topology.layout().group(axis, rank);
      EXPECT_EQ(group.name(), comm::to_string(axis));
      EXPECT_EQ(group.rank(), axis == Axis::tp ? t : axis == Axis::pp ? p : d);
      EXPECT_EQ(group.members(), members);
      // The sum of world ranks exchanged inside the group equals the layout's members' sum.
      kernels::Buffer sum = filled_buffer(1, rank, {kernels::DType::f64, kernels::Device::cpu});
      comm::all_reduce(group, sum, comm::ReduceOp::sum);
      EXPECT_EQ(host_values(sum)[0], std::accumulate(members.begin(), members.end(), 0.0));
    }
    // The embedding group: first and last stage of this rank's pipeline, none in the middle.
    const comm::Communicator& embedding = topology.embedding_comm();
    const std::vector<int> members = topology.layout().embedding_group(rank);
    ASSERT_EQ(embedding.valid(), p == 0 || p == s.pp - 1);
    if (embedding.valid()) {
      EXPECT_EQ(embedding.name(), "embedding");
      EXPECT_EQ(embedding.size(), s.pp > 1 ? 2 : 1);
      EXPECT_EQ(embedding.rank(), p == 0 ? 0 : 1);
      EXPECT_EQ(embedding.members(), members);
      kernels::Buffer sum = filled_buffer(1, rank, {kernels::DType::f64, kernels::Device::cpu});
      comm::all_reduce(embedding, sum, comm::ReduceOp::sum);
      EXPECT_EQ(host_values(sum)[0], std::accumulate(members.begin(), members.end(), 0.0));
    }
  }
}

TEST(Topology, SizesThatDoNotFitTheWorldFailOnEveryRank) {
  const int n = world().size();
  try {
    comm::ParallelTopology topology(world(), 2, 2, n);
    ADD_FAILURE() << "accepted tp*pp*dp = " << 4 * n << " on a world of " << n;
  } catch (const comm::ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "tp*pp*dp = 2*2*" + std::to_string(n) + " = " +
                                             std::to_string(4 * n) + ", but the world size is " +
                                             std::to_string(n));
  }
  EXPECT_THROW(comm::ParallelTopology(world(), 0, 1, n), comm::ConfigError);
  EXPECT_THROW(comm::ParallelTopology(world(), 1, -1, n), comm::ConfigError);
}

TEST(Topology, ContextGroupsMatchTheLayoutAndCommunicate) {
  const int rank = world().rank();
  const int n = world().size();
  for (int cp = 1; cp <= n; ++cp) {
    if (n % cp != 0) continue;
    for (int tp : {1, n / cp}) {
      SCOPED_TRACE("cp=" + std::to_string(cp) + " tp=" + std::to_string(tp));
      const int dp = n / (cp * tp);
      const comm::ParallelTopology topology(world(), tp, 1, dp, cp);
      EXPECT_EQ(topology.cp(), cp);
      EXPECT_EQ(topology.cp_rank(), (rank / tp) % cp);
      EXPECT_EQ(topology.tp_rank(), rank % tp);
      EXPECT_EQ(topology.dp_rank(), rank / (tp * cp));
      const std::vector<int> ring = topology.layout().group(Axis::cp, rank);
      const std::vector<int> dp_cp = topology.layout().dp_cp_group(rank);
      EXPECT_EQ(topology.cp_comm().name(), "cp");
      EXPECT_EQ(topology.cp_comm().rank(), topology.cp_rank());
      EXPECT_EQ(topology.cp_comm().members(), ring);
      EXPECT_EQ(topology.dp_cp_comm().name(), cp == 1 ? "dp" : "dp_cp");
      EXPECT_EQ(topology.dp_cp_comm().rank(), topology.dp_rank() * cp + topology.cp_rank());
      EXPECT_EQ(topology.dp_cp_comm().members(), dp_cp);
      for (const comm::Communicator* group : {&topology.cp_comm(), &topology.dp_cp_comm()}) {
        const std::vector<int> members = group->members();
        kernels::Buffer sum = filled_buffer(1, rank, {kernels::DType::f64, kernels::Device::cpu});
        comm::all_reduce(*group, sum, comm::ReduceOp::sum);
        EXPECT_EQ(host_values(sum)[0], std::accumulate(members.begin(), members.end(), 0.0));
      }
    }
  }
}

TEST(Topology, CpNotDividingTheWorldFailsOnEveryRank) {
  const int n = world().size();
  try {
    comm::ParallelTopology topology(world(), 1, 1, 1, n + 1);
    ADD_FAILURE() << "accepted cp = " << n + 1 << " on a world of " << n;
  } catch (const comm::ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "tp*cp*pp*dp = 1*" + std::to_string(n + 1) +
                                             "*1*1 = " + std::to_string(n + 1) +
                                             ", but the world size is " + std::to_string(n));
  }
}

TEST(Topology, GroupsShareTheWorldsSettings) {
  SettingsGuard guard(world());
  const comm::ParallelTopology topology(world(), 1, world().size(), 1);
  world().set_timeout(7.5);
  EXPECT_EQ(topology.pp_comm().timeout(), 7.5);
  comm::Communicator dp = topology.dp_comm();
  dp.set_timeout(9.0);
  EXPECT_EQ(world().timeout(), 9.0);
  EXPECT_EQ(topology.tp_comm().timeout(), 9.0);
  world().set_max_message_elements(5);
  EXPECT_EQ(topology.tp_comm().max_message_elements(), 5u);
}

}  // namespace
}  // namespace mpitron::test
