// GPT training over every topology of the test world: the per-step loss equals the 1-rank
// run's (every schedule, micro-batch count and optimizer, with sequence parallelism, with
// interleaved 1F1B), planted faults break that equality, and five AdamW steps match PyTorch
// (tests/data/gpt_train.json); under bf16 (bfloat16 GEMM operands) the curve stays near float32's,
// the float32 masters keep updates below bfloat16's resolution, and five steps match PyTorch's
// (tests/data/gpt_train_bf16.json).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <numeric>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/errors.h"
#include "comm/traffic.h"
#include "gpt_test_support.h"
#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"
#include "nn/models/generate.h"
#include "nn/optim/lr_schedule.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::nn {
namespace {

struct Recipe {
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  std::int64_t micro_batches = 2;  // per replica per step
  OptimizerKind optimizer = OptimizerKind::adamw;
  double grad_clip = 0.5;  // active in most steps, so the global norm matters
  std::int64_t vocab = 256;
  GeluForm gelu = GeluForm::exact;
  bool distributed_optimizer = false;
  bool sequence_parallel = false;
  int virtual_stages = 1;  // model chunks per stage (interleaved 1F1B with 2)
  std::int64_t layers = 4;
  bool bf16 = false;  // bfloat16 GEMM operands, float32 master weights (train --bf16)
  bool grad_reduce_in_bf16 = false;  // DP gradients reduced in bfloat16
  bool llama = false;                // the llama family: 4 heads on 2 key/value heads, ffn 40
  bool untied = false;               // llama with a separate LM head
  int cp = 1;                        // context-parallel degree (the world is tp cp pp dp)
  CpComm cp_comm = CpComm::ring;
  bool recompute = false;  // recompute each block's activations in backward
};

constexpr std::int64_t kGlobalBatch = 16, kSeq = 8, kSteps = 20;
const GptConfig kConfig{256, kSeq, 4, 16, 4};

// The per-step losses of kSteps steps of `recipe` on topology (tp, pp, dp) of `world`: the
// built-in corpus, GPT-2 init, warmup 5 then cosine.
std::vector<double> loss_curve(const comm::Communicator& world, int tp, int pp, int dp,
                               const Recipe& recipe) {
  const comm::ParallelTopology topology(world, tp, pp, dp, recipe.cp);
  GptTrainOptions options;
  options.cp_comm = recipe.cp_comm;
  options.recompute = recipe.recompute;
  options.schedule = recipe.schedule;
  options.optimizer = recipe.optimizer;
  options.grad_clip = recipe.grad_clip;
  options.distributed_optimizer = recipe.distributed_optimizer;
  options.sequence_parallel = recipe.sequence_parallel;
  options.virtual_stages = recipe.virtual_stages;
  options.grad_reduce_in_bf16 = recipe.grad_reduce_in_bf16;
  options.bf16 = recipe.bf16;
  const double lr = recipe.optimizer == OptimizerKind::sgd ? 0.5 : 3e-3;
  GptConfig config = kConfig;
  config.vocab = recipe.vocab;
  config.padded_vocab = padded_vocab_size(recipe.vocab, tp);
  config.gelu = recipe.gelu;
  config.layers = recipe.layers;
  if (recipe.llama) {
    config.arch = Arch::llama;
    config.kv_heads = 2;
    config.ffn_hidden = 40;
    config.tied_embeddings = !recipe.untied;
  }
  GptTrainer trainer(config, gpt2_init(3, config.layers, DType::f32, Device::cpu), topology,
                     options);
  static const TokenCorpus corpus = TokenCorpus::builtin();
  WindowSampler sampler(static_cast<std::int64_t>(corpus.split()), kSeq, kGlobalBatch, dp,
                        topology.dp_rank(), 5);
  const LrSchedule schedule{lr, lr / 10, 5, kSteps};
  const std::int64_t micro = kGlobalBatch / dp / recipe.micro_batches;
  std::vector<double> losses;
  kernels::set_gemm_operands(recipe.bf16 ? kernels::GemmOperands::bfloat16
                                         : kernels::GemmOperands::float32);
  for (std::int64_t step = 1; step <= kSteps; ++step) {
    const std::vector<std::int64_t> starts = sampler.starts(step - 1);
    std::vector<TokenBatch> batches;
    for (std::int64_t i = 0; i < recipe.micro_batches; ++i) {
      batches.push_back(make_token_batch(
          corpus.tokens(), {starts.begin() + i * micro, starts.begin() + (i + 1) * micro}, kSeq,
          Device::cpu));
    }
    losses.push_back(trainer.step(batches, schedule.at(step)).loss);
  }
  kernels::set_gemm_operands(kernels::GemmOperands::float32);
  return losses;
}

// The 1-rank run, on a communicator of this rank alone.
std::vector<double> reference_curve(const Recipe& recipe) {
  const comm::Communicator self = test::world().split(test::world().rank(), 0, "self");
  Recipe one_rank = recipe;
  one_rank.cp = 1;
  return loss_curve(self, 1, 1, 1, one_rank);
}

double max_relative_deviation(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

// Topologies of this world worth a loss curve: all of them up to 4 ranks; at 8 ranks (on a
// 2-core CI machine) the 3-D one only.
std::vector<std::array<int, 3>> curve_topologies() {
  const int world = test::world().size();
  if (world == 8) return {{2, 2, 2}};
  return test::topologies_of(world);
}

// Float32: the topologies sum in different orders (TP all-reduces, micro-batch accumulation),
// which AdamW's normalised update amplifies at most slowly; 1e-5 relative over 20 steps is the
// issue's bound and measured deviations are below 2e-6. The last recipe is GPT-2's vocabulary
// 50257, padded to 50304 on every rank, with the tanh GELU.
TEST(GptTraining, EveryTopologyFollowsTheOneRankLossCurve) {
  const Recipe recipes[] = {
      {ScheduleKind::one_f_one_b, 1, OptimizerKind::adamw},
      {ScheduleKind::one_f_one_b, 2, OptimizerKind::adamw},
      {ScheduleKind::one_f_one_b, 4, OptimizerKind::adamw},
      {ScheduleKind::afab, 4, OptimizerKind::adamw},
      {ScheduleKind::one_f_one_b, 2, OptimizerKind::sgd},
      {ScheduleKind::one_f_one_b, 2, OptimizerKind::adamw, 0.5, 50257, GeluForm::tanh},
      {ScheduleKind::one_f_one_b, 2, OptimizerKind::adamw, 0.5, 256, GeluForm::exact, true},
      {ScheduleKind::afab, 4, OptimizerKind::sgd, 0.5, 256, GeluForm::exact, true},
      {ScheduleKind::one_f_one_b, 2, OptimizerKind::adamw, 0.5, 50257, GeluForm::tanh, true}};
  for (const Recipe& recipe : recipes) {
    const std::vector<double> reference = reference_curve(recipe);
    for (const auto& [tp, pp, dp] : curve_topologies()) {
      SCOPED_TRACE(fmt::format("tp {} pp {} dp {}, {} x{} micro-batches, {}{}, vocab {}", tp, pp,
                               dp, to_string(recipe.schedule), recipe.micro_batches,
                               recipe.optimizer == OptimizerKind::sgd ? "sgd" : "adamw",
                               recipe.distributed_optimizer ? " (distributed)" : "", recipe.vocab));
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, recipe);
      EXPECT_LE(max_relative_deviation(curve, reference), 1e-5);
      EXPECT_LT(curve.back(), curve.front());  // it learns
    }
  }
}

// Interleaved 1F1B (2 virtual stages, 8 layers so that every pp of the world divides them in
// chunks, micro-batches a multiple of pp) follows the 1-rank curve on every topology with pp >= 2
// (at 4 ranks (1, 4, 1), (2, 2, 1), (1, 2, 2); at 8 ranks (2, 2, 2)), under 1F1B and AFAB, with
// vocab 256 and with GPT-2's 50257 padded to 50304, and with sequence parallelism; the same
// bound as above.
TEST(GptTraining, InterleavedStagesFollowTheOneRankLossCurve) {
  const Recipe recipes[] = {
      {.micro_batches = 4, .virtual_stages = 2, .layers = 8},
      {.schedule = ScheduleKind::afab, .micro_batches = 4, .virtual_stages = 2, .layers = 8},
      {.micro_batches = 4,
       .vocab = 50257,
       .gelu = GeluForm::tanh,
       .virtual_stages = 2,
       .layers = 8},
      {.micro_batches = 4, .sequence_parallel = true, .virtual_stages = 2, .layers = 8}};
  for (const Recipe& recipe : recipes) {
    Recipe plain = recipe;
    plain.sequence_parallel = false;
    plain.virtual_stages = 1;
    const std::vector<double> reference = reference_curve(plain);
    for (const auto& [tp, pp, dp] : curve_topologies()) {
      if (pp < 2) continue;
      SCOPED_TRACE(fmt::format("tp {} pp {} dp {}, {} x{} micro-batches, vocab {}, sp {}, v 2", tp,
                               pp, dp, to_string(recipe.schedule), recipe.micro_batches,
                               recipe.vocab, recipe.sequence_parallel));
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, recipe);
      EXPECT_LE(max_relative_deviation(curve, reference), 1e-5);
      EXPECT_LT(curve.back(), curve.front());
    }
  }
}

// Each fault breaks one reduction rule; on a topology where that rule matters the curve must
// leave the 1-rank curve by far more than rounding (1e-3). A DP sum instead of a mean scales the
// gradient by dp, which AdamW and active clipping both cancel (the loss curve cannot see it), so
// that fault is shown with plain SGD and clipping out of reach. The distributed optimizer's
// faults (a shard one block off, the parameters' all-gather skipped) run with it on. Chunks
// mapped to the wrong stage run the blocks in another order; GPT-2's small initialisation makes
// the blocks nearly commute, so the curve moves by only 1.3e-4 (measured at pp 2 and 4), still
// 2.6x beyond 5e-5 and 13x beyond the 1e-5 bound of the equality test above.
TEST(GptTraining, PlantedFaultsLeaveTheLossCurve) {
  const Recipe adamw, sgd{ScheduleKind::one_f_one_b, 2, OptimizerKind::sgd, 1e9},
      distributed{.distributed_optimizer = true},
      interleaved{.micro_batches = 4, .virtual_stages = 2, .layers = 8};
  const Recipe plain{.micro_batches = 4, .layers = 8};
  const std::vector<double> interleaved_reference = reference_curve(plain);
  const std::vector<double> adamw_reference = reference_curve(adamw);
  const std::vector<double> sgd_reference = reference_curve(sgd);
  struct Case {
    Fault fault;
    bool applies;  // the topology has the parallel degree the fault needs
    const Recipe& recipe;
    const std::vector<double>& reference;
    double deviation = 1e-3;  // the least deviation from the 1-rank curve
  };
  for (const auto& [tp, pp, dp] : curve_topologies()) {
    const Case cases[] = {
        {Fault::dp_sum_not_average, dp > 1, sgd, sgd_reference},
        {Fault::embedding_group_not_reduced, pp > 1, adamw, adamw_reference},
        {Fault::norm_counts_replicas_per_rank, tp > 1, adamw, adamw_reference},
        {Fault::copy_to_tp_no_all_reduce, tp > 1, adamw, adamw_reference},
        {Fault::distributed_optimizer_wrong_shard, dp > 1, distributed, adamw_reference},
        {Fault::distributed_optimizer_no_all_gather, dp > 1, distributed, adamw_reference},
        {Fault::pp_chunk_wrong_stage, pp > 1, interleaved, interleaved_reference, 5e-5}};
    for (const Case& c : cases) {
      if (!c.applies) continue;
      SCOPED_TRACE(
          fmt::format("tp {} pp {} dp {}, fault {}", tp, pp, dp, static_cast<int>(c.fault)));
      inject_fault(c.fault);
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, c.recipe);
      inject_fault(Fault::none);
      EXPECT_GT(max_relative_deviation(curve, c.reference), c.deviation);
    }
  }
}

// Sequence parallelism on every topology of this world with tp > 1 follows the 1-rank curve (1e-5
// relative, as above; measured below 1e-7), with vocab 256, with 300, which is padded to 384, and
// together with the distributed optimizer.
// LayerNorm gradients left unsummed over TP break that bound: they are a small part of the model
// and AdamW normalises their scale, so the curve moves by only 5e-5 to 1.1e-4 in 20 steps
// (validate's block check compares those gradients directly).
TEST(GptTraining, SequenceParallelFollowsTheOneRankLossCurve) {
  Recipe padded, distributed;
  padded.vocab = 300;
  distributed.distributed_optimizer = true;
  for (const Recipe& recipe : {Recipe{}, padded, distributed}) {
    const std::vector<double> reference = reference_curve(recipe);
    Recipe sequence_parallel = recipe;
    sequence_parallel.sequence_parallel = true;
    for (const auto& [tp, pp, dp] : curve_topologies()) {
      if (tp == 1) continue;
      SCOPED_TRACE(fmt::format("tp {} pp {} dp {}, sequence parallel, vocab {}, distributed {}", tp,
                               pp, dp, recipe.vocab, recipe.distributed_optimizer));
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, sequence_parallel);
      EXPECT_LE(max_relative_deviation(curve, reference), 1e-5);
      EXPECT_LT(curve.back(), curve.front());
      if (recipe.vocab != 256 || recipe.distributed_optimizer) continue;
      inject_fault(Fault::sequence_parallel_layer_norm_grad_not_summed);
      const std::vector<double> faulty = loss_curve(test::world(), tp, pp, dp, sequence_parallel);
      inject_fault(Fault::none);
      EXPECT_GT(max_relative_deviation(faulty, reference), 1e-5);
    }
  }
}

// The llama family follows its one-rank curve on every topology its sizes allow (tp divides
// the 2 key/value heads), tied and untied, with the distributed optimizer, sequence parallelism
// and interleaved 1F1B, within GPT-2's 1e-5.
TEST(GptTraining, LlamaFollowsTheOneRankLossCurve) {
  const Recipe recipes[] = {
      {.llama = true},
      {.distributed_optimizer = true, .llama = true, .untied = true},
      {.sequence_parallel = true, .llama = true},
      {.micro_batches = 4, .virtual_stages = 2, .layers = 8, .llama = true, .untied = true}};
  for (const Recipe& recipe : recipes) {
    Recipe one_rank = recipe;
    one_rank.sequence_parallel = false;
    one_rank.virtual_stages = 1;
    const std::vector<double> reference = reference_curve(one_rank);
    for (const auto& [tp, pp, dp] : curve_topologies()) {
      if (tp > 2 || (recipe.virtual_stages > 1 &&
                     (pp < 2 || recipe.layers % (2 * pp) != 0 || recipe.micro_batches % pp != 0))) {
        continue;
      }
      SCOPED_TRACE(
          fmt::format("tp {} pp {} dp {}, llama, untied {}, distributed {}, sp {}, {} "
                      "virtual stages",
                      tp, pp, dp, recipe.untied, recipe.distributed_optimizer,
                      recipe.sequence_parallel, recipe.virtual_stages));
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, recipe);
      EXPECT_LE(max_relative_deviation(curve, reference), 1e-5);
      EXPECT_LT(curve.back(), curve.front());
    }
  }
}

// (tp, cp, pp, dp) with cp > 1 for this world: cp alone, and mixed with tp, pp and dp (at 8
// ranks, on a 2-core CI machine, two of them).
std::vector<std::array<int, 4>> context_parallel_topologies() {
  switch (test::world().size()) {
    case 2:
      return {{1, 2, 1, 1}};
    case 4:
      return {{1, 4, 1, 1}, {2, 2, 1, 1}, {1, 2, 2, 1}, {1, 2, 1, 2}};
    case 8:
      return {{2, 2, 2, 1}, {1, 4, 1, 2}};
    default:
      return {};
  }
}

// Context parallelism follows the one-rank curve within GPT-2's 1e-5 over 20 steps: ring and
// all-gather, GPT-2's learned positions and llama's RoPE at the zigzag positions, with sequence
// parallelism, the distributed optimizer (its shards over dp x cp), interleaved 1F1B and
// recompute (each block's ring attention run again in backward). kSeq 8
// makes cp 4's zigzag chunks one token each. Swapping the zigzag chunks (the planted fault:
// tokens at the wrong positions) leaves the curve by more than 1e-4 (measured 7.2e-4 at cp 2).
TEST(GptTraining, ContextParallelFollowsTheOneRankLossCurve) {
  const Recipe recipes[] = {
      {},
      {.cp_comm = CpComm::all_gather},
      {.llama = true},
      {.sequence_parallel = true, .llama = true, .cp_comm = CpComm::all_gather},
      {.distributed_optimizer = true},
      {.micro_batches = 4, .virtual_stages = 2, .layers = 8},
      {.llama = true, .recompute = true}};
  for (const Recipe& base : recipes) {
    Recipe one_rank = base;
    one_rank.sequence_parallel = false;
    one_rank.virtual_stages = 1;
    const std::vector<double> reference = reference_curve(one_rank);
    for (const auto& [tp, cp, pp, dp] : context_parallel_topologies()) {
      if ((base.llama && tp > 2) || (base.sequence_parallel && tp == 1) ||
          (base.virtual_stages > 1 && pp < 2)) {
        continue;
      }
      Recipe recipe = base;
      recipe.cp = cp;
      SCOPED_TRACE(fmt::format(
          "tp {} cp {} pp {} dp {}, {}, llama {}, sp {}, distributed {}, {} "
          "virtual stages",
          tp, cp, pp, dp, cp_comm_name(recipe.cp_comm), recipe.llama, recipe.sequence_parallel,
          recipe.distributed_optimizer, recipe.virtual_stages));
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, recipe);
      EXPECT_LE(max_relative_deviation(curve, reference), 1e-5);
      EXPECT_LT(curve.back(), curve.front());
      if (&base != &recipes[0]) continue;
      inject_fault(Fault::cp_zigzag_chunks_swapped);
      const std::vector<double> faulty = loss_curve(test::world(), tp, pp, dp, recipe);
      inject_fault(Fault::none);
      EXPECT_GT(max_relative_deviation(faulty, reference), 1e-4);
    }
  }
}

// bf16 (train --bf16): bfloat16 GEMM operands with float32 master weights, main gradients and
// AdamW moments, with the distributed optimizer and, at tp > 1, sequence parallelism, for GPT-2
// and for the llama family (on the topologies whose tp divides its 2 key/value heads). Each
// bf16 loss of the 20 steps lies within 0.05 of the float32 one-rank loss (llm.c's tolerance
// for its bf16 trainer against float32), and differs from it (the operands were rounded: the
// curves measured 4e-4 apart at most). The bf16 topologies follow the bf16 one-rank curve
// within 1e-3 relative: they round the same float32 values except where a float32 summation
// order moves one across a bfloat16 rounding boundary (validate's bf16 GPT check), and at tp > 1
// where the TP mappings carry bfloat16 (each rank's partial sum rounded before the sum): over the
// 20 steps measured at most 4.5e-5 relative (GPT-2 at (2, 1, 2)), 2.4e-5 at (2, 2, 2), 2.6e-5 at
// pp 2 and dp > 1 without TP, where float32 topologies agree within 1e-7.
TEST(GptTraining, Bf16FollowsTheFloat32LossCurve) {
  for (const bool llama : {false, true}) {
    const Recipe fp32{.distributed_optimizer = true, .llama = llama};
    Recipe bf16 = fp32;
    bf16.bf16 = true;
    const std::vector<double> reference = reference_curve(fp32);
    const std::vector<double> bf16_reference = reference_curve(bf16);
    double largest = 0.0;
    for (std::size_t i = 0; i < reference.size(); ++i) {
      EXPECT_NEAR(bf16_reference[i], reference[i], 0.05) << "step " << i + 1 << " llama " << llama;
      largest = std::max(largest, std::abs(bf16_reference[i] - reference[i]));
    }
    EXPECT_GT(largest, 0.0) << "bf16 operands left the float32 curve unchanged, llama " << llama;
    for (const auto& [tp, pp, dp] : curve_topologies()) {
      if (llama && tp > 2) continue;
      SCOPED_TRACE(
          fmt::format("tp {} pp {} dp {}, {}, bf16, distributed optimizer, sequence "
                      "parallel at tp > 1",
                      tp, pp, dp, llama ? "llama" : "gpt2"));
      Recipe parallel = bf16;
      parallel.sequence_parallel = tp > 1;
      const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, parallel);
      EXPECT_LE(max_relative_deviation(curve, bf16_reference), 1e-3);
      EXPECT_LT(curve.back(), curve.front());
    }
  }
}

// bf16 at pp 2 with 1 and 2 virtual stages (the second rounds at three stage boundaries, one of
// them from the last stage back to the first): the stages exchange bfloat16 activations and
// gradients (PipelineSpec::bf16_wire). Each rank's pp payload over the run falls by exactly 2
// bytes for every element it sends: at pp 2, 2 v - 1 activations or gradients of [micro-batch,
// seq, hidden] per micro-batch (the loss and gradient-norm sums on pp stay float64 in both runs).
// The curve follows the one-rank bf16 curve, which sends nothing, within the 1e-3 relative of
// every bf16 topology: the wire rounds each boundary's activation and gradient once more (2^-9
// relative at most), measured 1.7e-5 to 2.4e-5 at dp 1 and 2, where the float32 wire measured
// 1.8e-6 to 3.3e-6 (the two wires' curves 1.8e-5 to 2.3e-5 apart).
TEST(GptTraining, Bf16PipelineSendsCarryBfloat16) {
  const int world = test::world().size();
  if (world != 2 && world != 4) GTEST_SKIP() << "pp 2 on 2 or 4 ranks";
  const int dp = world / 2;
  Recipe bf16;
  bf16.bf16 = true;
  const std::vector<double> reference = reference_curve(bf16);
  for (const int v : {1, 2}) {
    SCOPED_TRACE(fmt::format("tp 1 pp 2 dp {}, {} virtual stages", dp, v));
    Recipe wire = bf16;
    wire.virtual_stages = v;
    Recipe float32 = wire;
    float32.bf16 = false;
    const comm::Traffic start = comm::traffic();
    const std::vector<double> curve = loss_curve(test::world(), 1, 2, dp, wire);
    const comm::Traffic middle = comm::traffic();
    loss_curve(test::world(), 1, 2, dp, float32);
    const std::uint64_t bf16_bytes = comm::traffic_since(start, middle)["pp"];
    const std::uint64_t float32_bytes = comm::traffic_since(middle, comm::traffic())["pp"];
    const auto elements = static_cast<std::uint64_t>(kSteps * bf16.micro_batches * (2 * v - 1) *
                                                     (kGlobalBatch / dp / bf16.micro_batches) *
                                                     kSeq * kConfig.hidden);
    EXPECT_EQ(float32_bytes - bf16_bytes, 2 * elements);
    EXPECT_LE(max_relative_deviation(curve, reference), 1e-3);
  }
}

// bf16 with the distributed optimizer at dp = world: the parameters hold bfloat16 values, so the
// all-gather after each update carries them as bfloat16 (comm::Wire::bf16), exactly. Each rank
// hands the all-gather its block of every bucket, flat / dp elements per step (flat: the padded
// flat buffer, the buckets' sum), so its dp payload over the run falls by exactly 2 bytes for
// each of them; the gradients' reduce-scatter and the loss and norm sums carry the same bytes
// in both runs.
TEST(GptTraining, Bf16DistributedOptimizerAllGathersBfloat16) {
  const int dp = test::world().size();
  if (dp == 1) GTEST_SKIP() << "no all-gather at dp 1";
  Recipe bf16{.distributed_optimizer = true};
  bf16.bf16 = true;
  Recipe float32 = bf16;
  float32.bf16 = false;
  const comm::ParallelTopology topology(test::world(), 1, 1, dp);
  GptTrainOptions options;
  options.distributed_optimizer = true;
  GptTrainer layout(kConfig, gpt2_init(3, kConfig.layers, DType::f32, Device::cpu), topology,
                    options);
  std::uint64_t flat = 0;
  for (std::size_t i = 0; i < layout.gradients().bucket_count(); ++i)
    flat += layout.gradients().bucket_elements(i);
  const comm::Traffic start = comm::traffic();
  loss_curve(test::world(), 1, 1, dp, bf16);
  const comm::Traffic middle = comm::traffic();
  loss_curve(test::world(), 1, 1, dp, float32);
  const std::uint64_t bf16_bytes = comm::traffic_since(start, middle)["dp"];
  const std::uint64_t float32_bytes = comm::traffic_since(middle, comm::traffic())["dp"];
  EXPECT_EQ(float32_bytes - bf16_bytes, 2 * kSteps * flat / static_cast<std::uint64_t>(dp));
}

// --grad-reduce-in-bf16: the DP gradients are rounded to bfloat16 and summed in it (at most
// dp - 1 further roundings of 2^-8 relative each), so the curve leaves the float32-reduction
// bf16 curve of the same topology, and stays within 1e-3 relative of it over 20 steps: AdamW
// divides each gradient by its own running magnitude, so a 2^-8 (4e-3) relative error of every
// gradient moves each update by at most about that fraction, and the loss by far less (measured
// 1.2e-5 to 1.8e-5 at dp 2 and 4); and within llm.c's 0.05 of the float32 curve. At dp 1
// nothing is reduced: the curves are equal.
TEST(GptTraining, Bf16GradientReductionStaysNearTheFloat32Reduction) {
  Recipe bf16{.distributed_optimizer = true};
  bf16.bf16 = true;
  const std::vector<double> reference = reference_curve(Recipe{.distributed_optimizer = true});
  for (const auto& [tp, pp, dp] : curve_topologies()) {
    SCOPED_TRACE(fmt::format("tp {} pp {} dp {}, bf16, distributed optimizer", tp, pp, dp));
    Recipe reduced = bf16;
    reduced.grad_reduce_in_bf16 = true;
    const std::vector<double> fp32_reduction = loss_curve(test::world(), tp, pp, dp, bf16);
    const std::vector<double> curve = loss_curve(test::world(), tp, pp, dp, reduced);
    const double deviation = max_relative_deviation(curve, fp32_reduction);
    EXPECT_LE(deviation, 1e-3);
    if (dp == 1) {
      EXPECT_EQ(deviation, 0.0);
    } else {
      EXPECT_GT(deviation, 0.0) << "the bfloat16 wire left the gradients unchanged";
    }
    for (std::size_t i = 0; i < curve.size(); ++i)
      EXPECT_NEAR(curve[i], reference[i], 0.05) << "step " << i + 1;
  }
}

// Every value of a tensor, as float64.
std::vector<std::vector<double>> values_of(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<double>> values;
  for (const Tensor& t : tensors)
    values.push_back(t.to_vector());
  return values;
}

std::vector<Tensor> tensors_of(const Parameters& parameters) {
  std::vector<Tensor> tensors;
  for (const Parameter& p : parameters)
    tensors.push_back(p.tensor);
  return tensors;
}

// The master copy matters: one AdamW step at lr 1e-6 moves every weight matrix element by about
// 1e-6, far below half a bfloat16 ulp of GPT-2's initial weights (2^-9 of ~0.02 = 4e-5). Under
// bf16 (GptTrainOptions::bf16), here with the distributed optimizer over the whole world:
// - the float32 masters start as the initial weights and take the step (more than 99 % of
//   the elements move);
// - every parameter holds its master rounded to bfloat16, before and after the step, on every
//   replica (the masters' shards are all-gathered as bfloat16);
// - the parameters move only where the step carries a master across a rounding midpoint, or
//   near zero: 6.0 % of them measured, bounded at 10 %;
// - the same step applied to the rounded parameters (a bf16 run without masters) leaves all but
//   the elements within about 2^9 1e-6 of zero unchanged: 3.2 % of them measured, bounded at 5 %,
//   so it would be lost.
// A float32 weight beyond bfloat16's largest finite value rounds to infinity: a --bf16 trainer
// refuses it when it is built, with comm::ConfigError on every rank naming the parameter; a
// float32 trainer takes it.
// gpt2_init(3) of kConfig with `value` planted at element 5 of the parameters whose names end
// with `suffix`.
MasterInit init_with_planted(const std::string& suffix, float value) {
  const MasterInit base = gpt2_init(3, kConfig.layers, DType::f32, Device::cpu);
  return [base, suffix, value](const ParameterSpec& spec) {
    Tensor t = base(spec);
    if (spec.name.ends_with(suffix)) t.buffer().data_as<float>()[5] = value;
    return t;
  };
}

TEST(GptTraining, Bf16RefusesWeightsThatRoundToInfinity) {
  const comm::ParallelTopology topology(test::world(), 1, 1, test::world().size());
  const MasterInit init = init_with_planted("attn.c_proj.weight", 3.4e38f);
  GptTrainOptions options;
  options.bf16 = true;
  try {
    const GptTrainer trainer(kConfig, init, topology, options);
    ADD_FAILURE() << "no error";
  } catch (const comm::ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("beyond bfloat16's largest finite value"), std::string::npos) << message;
    EXPECT_NE(message.find("(here: "), std::string::npos) << message;
    EXPECT_NE(message.find("attn.c_proj.weight"), std::string::npos) << message;
    // Every replica holds the weight: every rank is named, each once.
    std::vector<int> all(static_cast<std::size_t>(test::world().size()));
    std::iota(all.begin(), all.end(), 0);
    EXPECT_NE(message.find("parameters on " + comm::ranks_phrase(all) + " hold"), std::string::npos)
        << message;
  }
  EXPECT_NO_THROW(GptTrainer(kConfig, init, topology, GptTrainOptions{}));
}

// A finite weight whose values overflow float32 (3.39e38, below bfloat16's rounding to infinity,
// so not refused) makes the logits NaN: generate throws NonFiniteLogits at the first generated
// token instead of drawing from them, on every rank (each gathers the same logits); the same
// model without that weight generates.
TEST(GptGeneration, NonFiniteLogitsAreAnErrorNotASample) {
  const comm::ParallelTopology topology(test::world(), 1, 1, test::world().size());
  const MasterInit base = gpt2_init(3, kConfig.layers, DType::f32, Device::cpu);
  const MasterInit huge = init_with_planted("h.0.mlp.c_fc.weight", 3.39e38f);
  const std::vector<std::int64_t> prompt{72, 105};
  try {
    generate(GptStage(kConfig, huge, topology), topology.tp_comm(), prompt, 3, SamplingOptions{});
    ADD_FAILURE() << "no error";
  } catch (const NonFiniteLogits& e) {
    EXPECT_STREQ(e.what(), "the logits of generated token 1 hold NaN");
  }
  EXPECT_EQ(
      generate(GptStage(kConfig, base, topology), topology.tp_comm(), prompt, 3, SamplingOptions{})
          .size(),
      5u);
}

TEST(GptTraining, Bf16MasterWeightsKeepUpdatesBelowBfloat16Resolution) {
  const comm::ParallelTopology topology(test::world(), 1, 1, test::world().size());
  GptTrainOptions options;
  options.bf16 = true;
  options.distributed_optimizer = true;
  const MasterInit init = gpt2_init(3, kConfig.layers, DType::f32, Device::cpu);
  GptTrainer trainer(kConfig, init, topology, options);
  const auto round = [](double x) {
    return static_cast<double>(kernels::bf16_to_float(kernels::to_bf16(static_cast<float>(x))));
  };
  const auto expect_rounded_masters = [&](const std::vector<std::vector<double>>& masters) {
    const std::vector<std::vector<double>> parameters = values_of(tensors_of(trainer.parameters()));
    for (std::size_t i = 0; i < masters.size(); ++i) {
      std::size_t wrong = 0;
      for (std::size_t j = 0; j < masters[i].size(); ++j)
        wrong += parameters[i][j] != round(masters[i][j]);
      EXPECT_EQ(wrong, 0u) << trainer.parameters()[i].name;
    }
  };
  const std::vector<std::vector<double>> masters_before = values_of(trainer.master_weights());
  const std::vector<std::vector<double>> parameters_before =
      values_of(tensors_of(trainer.parameters()));
  const Parameters dense = GptTrainer(kConfig, init, topology, GptTrainOptions{}).parameters();
  EXPECT_EQ(masters_before, values_of(tensors_of(dense)));
  expect_rounded_masters(masters_before);

  const TokenCorpus corpus = TokenCorpus::builtin();
  kernels::set_gemm_operands(kernels::GemmOperands::bfloat16);
  trainer.step({make_token_batch(corpus.tokens(), {0, 100, 200, 300}, kSeq, Device::cpu)}, 1e-6);
  kernels::set_gemm_operands(kernels::GemmOperands::float32);
  const std::vector<std::vector<double>> masters_after = values_of(trainer.master_weights());
  expect_rounded_masters(masters_after);

  std::size_t elements = 0, master_moved = 0, parameter_moved = 0, without_master_moved = 0;
  for (std::size_t i = 0; i < masters_after.size(); ++i) {
    const Parameter& p = trainer.parameters()[i];
    if (p.tensor.ndim() != 2 || !p.name.ends_with("weight")) continue;
    const std::vector<double> parameter_after = p.tensor.to_vector();
    for (std::size_t j = 0; j < masters_after[i].size(); ++j) {
      ++elements;
      master_moved += masters_after[i][j] != masters_before[i][j];
      parameter_moved += parameter_after[j] != parameters_before[i][j];
      const double start = parameters_before[i][j];
      without_master_moved += round(start + (masters_after[i][j] - masters_before[i][j])) != start;
    }
  }
  ASSERT_GT(elements, 0u);
  EXPECT_GT(static_cast<double>(master_moved) / elements, 0.99);
  EXPECT_LT(static_cast<double>(parameter_moved) / elements, 0.10);
  EXPECT_LT(static_cast<double>(without_master_moved) / elements, 0.05);
}

// One golden file of tools/make_golden_gpt.py: five AdamW steps from gpt.json's parameters.
struct GoldenSteps {
  const char* file;
  double clip;
  bool bf16;               // float32 with bfloat16 GEMM operands, else float64
  double first_loss_rtol;  // on the first step's loss
  double first_norm_rtol;  // on the first step's gradient norm
  double step_rtol;        // on each later step's loss and norm
  double final_rtol;       // on each final tensor, of its scale (test::max_rel_error)
  /// Under bf16 the golden of pp 2, whose stages exchange bfloat16 (PipelineSpec::bf16_wire):
  /// PyTorch's run rounds the activation between its two blocks and that gradient.
  const char* pp2_file = nullptr;
  /// Under bf16 at tp > 1, where the TP mappings round each rank's partial sum, which PyTorch's
  /// run does not have: the first, later and final bounds there (0: the bounds above).
  double tp_first_rtol = 0.0, tp_step_rtol = 0.0, tp_final_rtol = 0.0;
};

// The golden's five steps on every topology of the test world, each step's loss and norm and the
// final parameters against PyTorch's.
void expect_golden_steps(const GoldenSteps& run) {
  const test::GoldenFile init("gpt.json");
  const GptConfig config{256, 16, 2, 32, 4};
  const DType dtype = run.bf16 ? DType::f32 : DType::f64;
  for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
    if (config.layers % pp != 0) continue;
    const char* file = run.bf16 && pp > 1 ? run.pp2_file : run.file;
    const bool tp_bounds = tp > 1 && run.tp_first_rtol > 0.0;
    const double first_loss_rtol = tp_bounds ? run.tp_first_rtol : run.first_loss_rtol;
    const double first_norm_rtol = tp_bounds ? run.tp_first_rtol : run.first_norm_rtol;
    const double step_rtol = tp_bounds ? run.tp_step_rtol : run.step_rtol;
    const double final_rtol = tp_bounds ? run.tp_final_rtol : run.final_rtol;
    const test::GoldenFile golden(file);
    SCOPED_TRACE(fmt::format("{}: tp {} pp {} dp {}", file, tp, pp, dp));
    const comm::ParallelTopology topology(test::world(), tp, pp, dp);
    GptTrainOptions options;
    options.lr = 1e-2;
    options.grad_clip = run.clip;
    options.dtype = dtype;
    options.bf16 = run.bf16;
    GptTrainer trainer(config, test::golden_init(init, dtype), topology, options);
    const LrSchedule schedule{1e-2, 1e-3, 2, 5};
    kernels::set_gemm_operands(run.bf16 ? kernels::GemmOperands::bfloat16
                                        : kernels::GemmOperands::float32);
    for (int step = 1; step <= 5; ++step) {
      const TokenBatch batch{test::golden_ids(golden, fmt::format("tokens.{}", step)),
                             test::golden_ids(golden, fmt::format("targets.{}", step))};
      const StepResult result =
          trainer.step(replica_micro_batches(batch, dp, topology.dp_rank(), 1), schedule.at(step));
      const double loss = golden.scalar(fmt::format("loss.{}", step));
      const double norm = golden.scalar(fmt::format("grad_norm.{}", step));
      EXPECT_LE(std::abs(result.loss - loss), (step == 1 ? first_loss_rtol : step_rtol) * loss)
          << "step " << step;
      EXPECT_LE(std::abs(result.grad_norm - norm), (step == 1 ? first_norm_rtol : step_rtol) * norm)
          << "step " << step;
    }
    kernels::set_gemm_operands(kernels::GemmOperands::float32);
    const std::vector<Tensor> weights = trainer.master_weights();
    for (std::size_t i = 0; i < weights.size(); ++i) {
      const Parameter& p = trainer.parameters()[i];
      // Under bf16 the k bias's gradient is rounding noise (zero in exact arithmetic), which
      // AdamW turns into full steps that each side draws differently.
      if (run.bf16 && p.name.ends_with("attn.k.bias")) continue;
      SCOPED_TRACE(p.name);
      const Tensor expected =
          test::slice_of(golden.tensor("final." + p.name), p, topology.tp_rank(), tp);
      EXPECT_LE(test::max_rel_error(weights[i], expected), final_rtol);
    }
  }
}

// Five AdamW steps with warmup from PyTorch's parameters and batches, with clipping at 1.0 (below
// every step's norm, so it scales every step) and at 10.0 (above every norm, so it must change
// nothing). Float64: 1e-9 relative on losses and norms, 1e-8 of each final tensor's scale (two
// float64 AdamW implementations; rounding grows a little through the steps).
TEST(GptTraining, FiveAdamWStepsMatchPyTorch) {
  expect_golden_steps({"gpt_train.json", 1.0, false, 1e-9, 1e-9, 1e-9, 1e-8});
  expect_golden_steps({"gpt_train_clip_inactive.json", 10.0, false, 1e-9, 1e-9, 1e-9, 1e-8});
}

// The same five steps under train --bf16 against PyTorch's float32 run with bfloat16 operands in
// every linear layer and the head (make_golden_gpt.py's Bf16Linear), whose forward reads every
// parameter, and attention reads q, k and v, rounded to bfloat16 with float32 gradients
// (Bf16Read), whose MLP rounds fc1's product to bfloat16 before its bias (bf16_fc1), whose head
// writes bfloat16 logits with a bfloat16 gradient (bf16_head), whose LayerNorms' backward reads
// its xhat as kept, rounded to bfloat16 (Bf16KeptLayerNorm), and whose attention multiplies
// bfloat16 operands as the fused kernel does (P, dO and dS rounded, the output kept rounded for
// backward: Bf16KeptAttention); the final tensors compared are the masters
// (GptTrainer::master_weights). Both round float32 values that differ only by their summation
// orders, so a few operands and activations round to neighbouring bfloat16 values; parameters
// that hold bfloat16 values make that more frequent. Measured (2-core Zen 5, np 1, 2, 4 and 8,
// 2026-12-07):
// - tp 1, step 1: the loss 7.7e-8, the norm 2.1e-5 (pp 2's golden rounds the activation between
//   the blocks, as the bfloat16 pipeline wire does). The loss, bounded at 2e-5, sees each
//   rounding the golden models: PyTorch's run with q, k and v in float32 is 1.1e-4 off, with
//   fc1's product in float32 1.6e-4, with float32 logits 3.3e-5, and a run whose forward reads
//   the unrounded masters 9.8e-5 (2026-12-06); the norm is bounded at 1e-3. Later steps: AdamW's
//   normalised update spreads those differences, up to 2.5e-4 (loss) and 2.1e-3 (norm), bounded
//   at 4e-3. Final masters: up to 3.5e-2 of a tensor's scale (wte), bounded at 5e-2.
// - tp > 1: the TP mappings carry bfloat16, rounding each rank's partial sum, which PyTorch's run
//   has no counterpart of: step 1 up to 8.4e-4, later steps 2.6e-3, final masters 5.7e-2 but for
//   block 1's q bias at tp 4, 1.27e-1 of its 8-element slice (one head a rank; its gradient sums
//   dq, where near-uniform attention leaves mostly rounding noise), so there the bounds are 4e-3,
//   1e-2 and 2e-1. They no longer tell a run without the operand rounding apart; the tp 1
//   topologies do, and TpMappingsBf16 checks the TP wire bit for bit.
TEST(GptTraining, FiveBf16AdamWStepsMatchPyTorch) {
  expect_golden_steps({"gpt_train_bf16.json", 1.0, true, 2e-5, 1e-3, 4e-3, 5e-2,
                       "gpt_train_bf16_pp2.json", 4e-3, 1e-2, 2e-1});
}

}  // namespace
}  // namespace mpitron::nn
