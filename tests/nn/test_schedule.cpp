// Pipeline schedule tables as pure data (no MPI): known tables from the papers, the invariants
// every table must satisfy for many (pp, micro-batches), and a simulation that runs all stages'
// tables together with blocking receives and non-blocking sends and finds no deadlock.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>
#include <stdexcept>
#include <string>

#include "nn/parallel/schedule.h"

namespace mpitron::nn {
namespace {

using Type = PipelineAction::Type;
using Tables = std::vector<std::vector<PipelineAction>>;

constexpr ScheduleKind kKinds[] = {ScheduleKind::afab, ScheduleKind::one_f_one_b};

Tables all_stages(ScheduleKind kind, int pp, int m) {
  Tables tables;
  for (int stage = 0; stage < pp; ++stage)
    tables.push_back(pipeline_schedule(kind, pp, stage, m));
  return tables;
}

// The micro-batches of the actions of `type` with `flag` (recv or send) set, in table order.
std::vector<int> transfers(const std::vector<PipelineAction>& table, Type type,
                           bool PipelineAction::*flag) {
  std::vector<int> order;
  for (const PipelineAction& action : table) {
    if (action.type == type && action.*flag) order.push_back(action.micro_batch);
  }
  return order;
}

// Most micro-batches whose forward ran and whose backward has not, at any point of the table.
int peak_in_flight(const std::vector<PipelineAction>& table) {
  int live = 0, peak = 0;
  for (const PipelineAction& action : table) {
    live += action.type == Type::forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

// Runs every stage's table at once: a receive blocks its stage until the neighbour's message is
// there (it must be the micro-batch the action expects), a send never blocks. Returns "" when
// every table ran to the end with all channels drained, else what went wrong.
std::string simulate(const Tables& tables) {
  const std::size_t pp = tables.size();
  // activations[s]: stage s -> s + 1; gradients[s]: stage s + 1 -> s.
  std::vector<std::deque<int>> activations(pp), gradients(pp);
  std::vector<std::size_t> next(pp, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t s = 0; s < pp; ++s) {
      if (next[s] == tables[s].size()) continue;
      const PipelineAction& action = tables[s][next[s]];
      const bool forward = action.type == Type::forward;
      if (action.recv) {
        if (forward ? s == 0 : s + 1 == pp) return "stage " + std::to_string(s) + " has no peer";
        std::deque<int>& in = forward ? activations[s - 1] : gradients[s];
        if (in.empty()) continue;  // blocked
        if (in.front() != action.micro_batch) {
          return "stage " + std::to_string(s) + " expected micro-batch " +
                 std::to_string(action.micro_batch) + " but got " + std::to_string(in.front());
        }
        in.pop_front();
      }
      if (action.send) {
        if (forward ? s + 1 == pp : s == 0) return "stage " + std::to_string(s) + " has no peer";
        (forward ? activations[s] : gradients[s - 1]).push_back(action.micro_batch);
      }
      ++next[s];
      progress = true;
    }
  }
  for (std::size_t s = 0; s < pp; ++s) {
    if (next[s] != tables[s].size()) {
      return "deadlock: stage " + std::to_string(s) + " blocked at action " +
             std::to_string(next[s]) + " of " + to_string(tables[s]);
    }
    if (!activations[s].empty() || !gradients[s].empty()) return "undelivered messages";
  }
  return "";
}

TEST(Schedule, OneFOneBMatchesThePaperFigure) {
  // Narayanan et al. 2021, Figure 4 (top): 4 stages, 8 micro-batches.
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::one_f_one_b, 4, 0, 8)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::one_f_one_b, 4, 1, 8)),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::one_f_one_b, 4, 3, 8)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  // Fewer micro-batches than warm-up slots: all forwards, then all backwards in order.
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::one_f_one_b, 4, 0, 2)), "F0 F1 B0 B1");
}

TEST(Schedule, AllForwardAllBackwardRunsBackwardsInReverse) {
  for (int stage = 0; stage < 3; ++stage) {
    EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::afab, 3, stage, 4)),
              "F0 F1 F2 F3 B3 B2 B1 B0");
  }
}

TEST(Schedule, TransferFlagsFollowTheStagePosition) {
  const auto table = pipeline_schedule(ScheduleKind::one_f_one_b, 3, 1, 2);
  EXPECT_EQ(table[0], (PipelineAction{Type::forward, 0, true, true}));
  const auto first = pipeline_schedule(ScheduleKind::one_f_one_b, 3, 0, 1);
  EXPECT_EQ(first, (std::vector<PipelineAction>{{Type::forward, 0, false, true},
                                                {Type::backward, 0, true, false}}));
  const auto last = pipeline_schedule(ScheduleKind::one_f_one_b, 3, 2, 1);
  EXPECT_EQ(last, (std::vector<PipelineAction>{{Type::forward, 0, true, false},
                                               {Type::backward, 0, false, true}}));
  const auto alone = pipeline_schedule(ScheduleKind::afab, 1, 0, 1);
  EXPECT_EQ(alone, (std::vector<PipelineAction>{{Type::forward, 0, false, false},
                                                {Type::backward, 0, false, false}}));
}

TEST(Schedule, EveryTableKeepsTheInvariants) {
  for (ScheduleKind kind : kKinds) {
    for (int pp = 1; pp <= 6; ++pp) {
      for (int m = 1; m <= 9; ++m) {
        SCOPED_TRACE(to_string(kind) + " pp=" + std::to_string(pp) + " m=" + std::to_string(m));
        const Tables tables = all_stages(kind, pp, m);
        for (int stage = 0; stage < pp; ++stage) {
          SCOPED_TRACE("stage " + std::to_string(stage) + ": " + to_string(tables[stage]));
          const auto& table = tables[stage];
          ASSERT_EQ(table.size(), 2 * static_cast<std::size_t>(m));
          std::set<int> forwarded, backwarded;
          for (const PipelineAction& action : table) {
            ASSERT_GE(action.micro_batch, 0);
            ASSERT_LT(action.micro_batch, m);
            if (action.type == Type::forward) {
              EXPECT_TRUE(forwarded.insert(action.micro_batch).second) << "forward twice";
              EXPECT_EQ(action.recv, stage > 0);
              EXPECT_EQ(action.send, stage < pp - 1);
            } else {
              EXPECT_TRUE(forwarded.count(action.micro_batch)) << "backward before forward";
              EXPECT_TRUE(backwarded.insert(action.micro_batch).second) << "backward twice";
              EXPECT_EQ(action.recv, stage < pp - 1);
              EXPECT_EQ(action.send, stage > 0);
            }
          }
          EXPECT_EQ(forwarded.size(), static_cast<std::size_t>(m));
          EXPECT_EQ(backwarded.size(), static_cast<std::size_t>(m));
          const int bound = kind == ScheduleKind::afab ? m : std::min(pp - stage, m);
          EXPECT_EQ(peak_in_flight(table), bound);
          if (stage + 1 < pp) {
            const auto& next = tables[stage + 1];
            EXPECT_EQ(transfers(table, Type::forward, &PipelineAction::send),
                      transfers(next, Type::forward, &PipelineAction::recv));
            EXPECT_EQ(transfers(next, Type::backward, &PipelineAction::send),
                      transfers(table, Type::backward, &PipelineAction::recv));
          }
        }
        EXPECT_EQ(simulate(tables), "");
      }
    }
  }
}

TEST(Schedule, TheSimulationDetectsDeadlockAndMisorder) {
  // Stage 0 waits for a gradient before sending the activation it depends on.
  const Tables deadlock{{{Type::backward, 0, true, false}, {Type::forward, 0, false, true}},
                        {{Type::forward, 0, true, false}, {Type::backward, 0, false, true}}};
  EXPECT_NE(simulate(deadlock).find("deadlock"), std::string::npos);
  // Stage 1 returns gradients in reverse order while stage 0 expects increasing order.
  Tables misordered = all_stages(ScheduleKind::one_f_one_b, 2, 2);
  misordered[1] = pipeline_schedule(ScheduleKind::afab, 2, 1, 2);
  EXPECT_EQ(simulate(misordered), "stage 0 expected micro-batch 0 but got 1");
}

TEST(Schedule, BadArgumentsAreRejected) {
  const auto message = [](int pp, int stage, int m) -> std::string {
    try {
      pipeline_schedule(ScheduleKind::one_f_one_b, pp, stage, m);
      return "accepted";
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
  };
  EXPECT_NE(message(0, 0, 1).find("pp=0, stage=0, micro_batches=1"), std::string::npos);
  EXPECT_NE(message(2, 2, 1).find("stage=2"), std::string::npos);
  EXPECT_NE(message(2, -1, 1).find("stage=-1"), std::string::npos);
  EXPECT_NE(message(2, 0, 0).find("micro_batches=0"), std::string::npos);
}

TEST(Schedule, NamesRoundTrip) {
  for (ScheduleKind kind : kKinds)
    EXPECT_EQ(parse_schedule(to_string(kind)), kind);
  EXPECT_EQ(to_string(ScheduleKind::one_f_one_b), "1f1b");
  try {
    parse_schedule("gpipe");
    ADD_FAILURE() << "accepted gpipe";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "unknown pipeline schedule 'gpipe' (expected afab or 1f1b)");
  }
}

}  // namespace
}  // namespace mpitron::nn
