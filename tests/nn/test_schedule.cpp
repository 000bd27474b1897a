// Pipeline schedule tables as pure data (no MPI): known tables from the papers, the invariants
// every table must satisfy for many (pp, virtual stages, micro-batches), and the simulation that
// runs all stages' tables together with blocking receives and non-blocking sends: it finds no
// deadlock and the bubble of the papers.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

#include "nn/parallel/schedule.h"
#include "nn/parallel/schedule_simulation.h"

namespace mpitron::nn {
namespace {

using Type = PipelineAction::Type;
using Tables = std::vector<std::vector<PipelineAction>>;

constexpr ScheduleKind kKinds[] = {ScheduleKind::afab, ScheduleKind::one_f_one_b};

Tables all_stages(ScheduleKind kind, int pp, int m, int v = 1) {
  Tables tables;
  for (int stage = 0; stage < pp; ++stage)
    tables.push_back(pipeline_schedule(kind, pp, stage, m, v));
  return tables;
}

// What stage `stage` of `pp` sends to (`receive` false) or receives from (`receive` true) stage
// `peer` in direction `type`, in table order: (upstream chunk, micro-batch) of each transfer.
std::vector<std::pair<int, int>> transfers(const std::vector<PipelineAction>& table, int pp,
                                           int stage, int peer, Type type, bool receive) {
  std::vector<std::pair<int, int>> order;
  for (const PipelineAction& action : table) {
    if (action.type != type || !(receive ? action.recv : action.send)) continue;
    const PipelineTransfer transfer = transfer_of(action, receive, pp, stage);
    if (transfer.peer == peer) order.emplace_back(transfer.upstream_chunk, action.micro_batch);
  }
  return order;
}

// Most (chunk, micro-batch) pairs whose forward ran and whose backward has not, at any point of
// the table.
int peak_in_flight(const std::vector<PipelineAction>& table) {
  int live = 0, peak = 0;
  for (const PipelineAction& action : table) {
    live += action.type == Type::forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

// simulate_schedule's complaint about `tables`, or "" when they run.
std::string simulation_error(const Tables& tables, int v = 1) {
  try {
    simulate_schedule(tables, v);
    return "";
  } catch (const std::logic_error& error) {
    return error.what();
  }
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

TEST(Schedule, InterleavedTablesFollowMegatronsOrder) {
  // pp 2, v 2, m 4: forwards in groups of 2 micro-batches through chunk 0 then chunk 1; warm-up
  // 2 (pp - stage - 1) + (v - 1) pp forwards.
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::one_f_one_b, 2, 0, 4, 2)),
            "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 B2c1 B3c1 B2c0 B3c0");
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::one_f_one_b, 2, 1, 4, 2)),
            "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 F3c1 B3c1 B2c0 B3c0");
  EXPECT_EQ(to_string(pipeline_schedule(ScheduleKind::afab, 2, 1, 2, 2)),
            "F0c0 F1c0 F0c1 F1c1 B1c1 B0c1 B1c0 B0c0");
  // Chunk 0 of stage 0 reads the data, chunk 1 of stage 0 receives from the last stage.
  const auto first = pipeline_schedule(ScheduleKind::one_f_one_b, 2, 0, 2, 2);
  EXPECT_EQ(first[0], (PipelineAction{Type::forward, 0, false, true, 0}));
  EXPECT_EQ(first[2], (PipelineAction{Type::forward, 0, true, true, 1}));
  EXPECT_EQ(transfer_of(first[2], /*receive=*/true, 2, 0), (PipelineTransfer{1, 0}));
  EXPECT_EQ(transfer_of(first[2], /*receive=*/false, 2, 0), (PipelineTransfer{1, 1}));
  const auto last = pipeline_schedule(ScheduleKind::one_f_one_b, 2, 1, 2, 2);
  EXPECT_EQ(last[2], (PipelineAction{Type::forward, 0, true, false, 1}));
  EXPECT_EQ(last[3], (PipelineAction{Type::backward, 0, false, true, 1}));
  EXPECT_EQ(transfer_of(last[3], /*receive=*/false, 2, 1), (PipelineTransfer{0, 1}));
}

TEST(Schedule, ChunksInFlightAreThePapers) {
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(chunks_in_flight(ScheduleKind::one_f_one_b, 4, stage, 8), 4 - stage);
    EXPECT_EQ(chunks_in_flight(ScheduleKind::afab, 4, stage, 8), 8);
    EXPECT_EQ(chunks_in_flight(ScheduleKind::afab, 4, stage, 8, 2), 16);
  }
  EXPECT_EQ(chunks_in_flight(ScheduleKind::one_f_one_b, 4, 1, 2), 2);
  // Interleaved, pp 4, v 2: 2 (pp - stage - 1) + (v - 1) pp + 1 chunks.
  EXPECT_EQ(chunks_in_flight(ScheduleKind::one_f_one_b, 4, 0, 8, 2), 11);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::one_f_one_b, 4, 3, 8, 2), 5);
  EXPECT_EQ(chunks_in_flight(ScheduleKind::one_f_one_b, 4, 0, 4, 2), 8);
}

TEST(Schedule, EveryTableKeepsTheInvariants) {
  for (ScheduleKind kind : kKinds) {
    for (int pp = 1; pp <= 6; ++pp) {
      for (int v = 1; v <= 4; ++v) {
        for (int m = 1; m <= 12; ++m) {
          if (!pipeline_layout_error(pp, v, m).empty()) continue;
          SCOPED_TRACE(to_string(kind) + " pp=" + std::to_string(pp) + " v=" + std::to_string(v) +
                       " m=" + std::to_string(m));
          const Tables tables = all_stages(kind, pp, m, v);
          for (int stage = 0; stage < pp; ++stage) {
            SCOPED_TRACE("stage " + std::to_string(stage) + ": " + to_string(tables[stage]));
            const auto& table = tables[stage];
            ASSERT_EQ(table.size(), 2 * static_cast<std::size_t>(v * m));
            std::set<std::pair<int, int>> forwarded, backwarded;
            for (const PipelineAction& action : table) {
              ASSERT_GE(action.micro_batch, 0);
              ASSERT_LT(action.micro_batch, m);
              ASSERT_GE(action.chunk, 0);
              ASSERT_LT(action.chunk, v);
              const std::pair key{action.chunk, action.micro_batch};
              const bool first = stage == 0 && action.chunk == 0;
              const bool last = stage == pp - 1 && action.chunk == v - 1;
              if (action.type == Type::forward) {
                EXPECT_TRUE(forwarded.insert(key).second) << "forward twice";
                EXPECT_EQ(action.recv, !first);
                EXPECT_EQ(action.send, !last);
              } else {
                EXPECT_TRUE(forwarded.count(key)) << "backward before forward";
                EXPECT_TRUE(backwarded.insert(key).second) << "backward twice";
                EXPECT_EQ(action.recv, !last);
                EXPECT_EQ(action.send, !first);
              }
            }
            EXPECT_EQ(forwarded.size(), static_cast<std::size_t>(v * m));
            EXPECT_EQ(backwarded.size(), static_cast<std::size_t>(v * m));
            EXPECT_EQ(peak_in_flight(table), chunks_in_flight(kind, pp, stage, m, v));
            const int next = (stage + 1) % pp;
            if (pp > 1) {
              for (Type type : {Type::forward, Type::backward}) {
                const bool down = type == Type::forward;
                EXPECT_EQ(transfers(tables[down ? stage : next], pp, down ? stage : next,
                                    down ? next : stage, type, false),
                          transfers(tables[down ? next : stage], pp, down ? next : stage,
                                    down ? stage : next, type, true));
              }
            }
          }
          EXPECT_EQ(simulation_error(tables, v), "");
        }
      }
    }
  }
}

TEST(Schedule, ForwardOnlyTablesRunEveryChunkOfEveryMicroBatch) {
  EXPECT_EQ(to_string(forward_schedule(2, 0, 2, 2)), "F0c0 F0c1 F1c0 F1c1");
  EXPECT_EQ(to_string(forward_schedule(3, 1, 2)), "F0 F1");
  for (int pp = 1; pp <= 5; ++pp) {
    for (int v = 1; v <= 3; ++v) {
      for (int m = 1; m <= 7; ++m) {
        if (!pipeline_layout_error(pp, v, m, /*forward_only=*/true).empty()) continue;
        SCOPED_TRACE("pp=" + std::to_string(pp) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(m));
        Tables tables;
        for (int stage = 0; stage < pp; ++stage) {
          tables.push_back(forward_schedule(pp, stage, m, v));
          const auto& table = tables.back();
          ASSERT_EQ(table.size(), static_cast<std::size_t>(v * m));
          for (std::size_t k = 0; k < table.size(); ++k) {
            const PipelineAction& action = table[k];
            EXPECT_EQ(action.type, Type::forward);
            EXPECT_EQ(action.micro_batch, static_cast<int>(k) / v);
            EXPECT_EQ(action.chunk, static_cast<int>(k) % v);
            EXPECT_EQ(action.recv, stage > 0 || action.chunk > 0);
            EXPECT_EQ(action.send, stage < pp - 1 || action.chunk < v - 1);
          }
        }
        EXPECT_EQ(simulation_error(tables, v), "");
      }
    }
  }
  EXPECT_EQ(pipeline_layout_error(2, 2, 3, /*forward_only=*/true), "");
  EXPECT_NE(pipeline_layout_error(1, 2, 3, /*forward_only=*/true), "");
}

TEST(Schedule, TheSimulatedBubbleIsThePapers) {
  for (int pp = 1; pp <= 6; ++pp) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = pp; m <= 4 * pp; m += pp) {
        if (!pipeline_layout_error(pp, v, m).empty()) continue;
        SCOPED_TRACE("pp=" + std::to_string(pp) + " v=" + std::to_string(v) +
                     " m=" + std::to_string(m));
        const double interleaved = static_cast<double>(pp - 1) / (v * m);
        const ScheduleTimeline one_f_one_b = simulate_schedule(ScheduleKind::one_f_one_b, pp, m, v);
        EXPECT_NEAR(one_f_one_b.bubble, interleaved, 1e-12);
        EXPECT_NEAR(one_f_one_b.makespan, 3.0 * m * (1 + interleaved), 1e-9);
        if (v == 1) {
          EXPECT_NEAR(simulate_schedule(ScheduleKind::afab, pp, m, v).bubble, interleaved, 1e-12);
        }
        for (const double idle : one_f_one_b.idle)
          EXPECT_NEAR(idle, interleaved / (1 + interleaved), 1e-12);
      }
    }
  }
}

TEST(Schedule, TheSimulationDetectsDeadlockAndMisorder) {
  // Stage 0 waits for a gradient before sending the activation it depends on.
  const Tables deadlock{{{Type::backward, 0, true, false}, {Type::forward, 0, false, true}},
                        {{Type::forward, 0, true, false}, {Type::backward, 0, false, true}}};
  EXPECT_NE(simulation_error(deadlock).find("deadlock: stage 0 waits at action 0"),
            std::string::npos);
  // Stage 1 returns gradients in reverse order while stage 0 expects increasing order.
  Tables misordered = all_stages(ScheduleKind::one_f_one_b, 2, 2);
  misordered[1] = pipeline_schedule(ScheduleKind::afab, 2, 1, 2);
  EXPECT_EQ(simulation_error(misordered),
            "stage 0 at B0 (chunk 0) expected micro-batch 0 of upstream chunk 0 but got "
            "micro-batch 1 of upstream chunk 0");
  // A chunk run on the wrong stage: stage 1's chunks swapped.
  Tables swapped = all_stages(ScheduleKind::one_f_one_b, 2, 2, 2);
  for (PipelineAction& action : swapped[1])
    action.chunk = 1 - action.chunk;
  EXPECT_NE(simulation_error(swapped, 2), "");
}

TEST(Schedule, BadArgumentsAreRejected) {
  const auto message = [](int pp, int stage, int m, int v = 1) -> std::string {
    try {
      pipeline_schedule(ScheduleKind::one_f_one_b, pp, stage, m, v);
      return "accepted";
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
  };
  EXPECT_NE(message(0, 0, 1).find("pp=0, virtual_stages=1, micro_batches=1"), std::string::npos);
  EXPECT_NE(message(2, 2, 1).find("stage=2"), std::string::npos);
  EXPECT_NE(message(2, -1, 1).find("stage=-1"), std::string::npos);
  EXPECT_NE(message(2, 0, 0).find("micro_batches=0"), std::string::npos);
  EXPECT_NE(message(2, 0, 1, 0).find("virtual_stages=0"), std::string::npos);
  EXPECT_EQ(message(1, 0, 4, 2),
            "pipeline_schedule: 2 virtual stages need at least 2 pipeline stages, got pp=1");
  EXPECT_EQ(message(2, 0, 3, 2),
            "pipeline_schedule: 2 virtual stages need micro-batches per step a multiple of pp=2, "
            "got 3");
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
