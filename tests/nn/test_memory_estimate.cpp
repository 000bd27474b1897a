// The memory estimate against what the tensor allocator hands out: building a GPT trainer and
// training it (1F1B, interleaved 1F1B with 2 virtual stages and all-forward-all-backward, with
// and without recompute, AdamW and SGD, the distributed optimizer, sequence parallelism, context
// parallelism at cp 2, bfloat16 GEMM operands) on every topology of the test world never holds
// more than nn::estimate_gpt_memory says, and holds at least 40 % of it (an estimate that bounds
// nothing useful fails too; SGD with recompute holds the least, 48 %).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "gpt_test_support.h"
#include "kernels/allocator.h"
#include "kernels/ops.h"
#include "nn/train/gpt_trainer.h"
#include "nn/train/memory_estimate.h"

namespace mpitron::nn {
namespace {

struct Case {
  ScheduleKind schedule;
  bool recompute;
  OptimizerKind optimizer;
  bool distributed_optimizer = false;
  bool sequence_parallel = false;
  int virtual_stages = 1;
  bool llama = false;           // 4 heads on 2 key/value heads, ffn 96, untied head
  int cp = 1;                   // context-parallel degree: (tp, pp, dp) share world / cp ranks
  bool bf16 = false;            // kernels::GemmOperands::bfloat16 (train --bf16)
  std::int64_t llama_ffn = 96;  // llama's SwiGLU inner size (1024: 32 x hidden)
};

constexpr std::int64_t kSeq = 32, kMicroBatch = 4, kMicroBatches = 4, kLayers = 4;

// The allocator's peak in-use bytes over building a GPT trainer of case c at (tp, pp, dp) and
// training it two steps, and the estimate for it.
struct Measured {
  double used;
  MemoryEstimate estimate;
  std::int64_t parameters;  // this rank's
};

Measured train_two_steps(const Case& c, int tp, int pp, int dp) {
  static const TokenCorpus corpus = TokenCorpus::builtin();
  const kernels::GemmOperandsScope operands(c.bf16 ? kernels::GemmOperands::bfloat16
                                                   : kernels::GemmOperands::float32);
  const comm::ParallelTopology topology(test::world(), tp, pp, dp, c.cp);
  GptConfig config{256, kSeq, kLayers, 32, 4};
  config.padded_vocab = padded_vocab_size(config.vocab, tp);
  if (c.llama) {
    config.arch = Arch::llama;
    config.kv_heads = 2;
    config.ffn_hidden = c.llama_ffn;
    config.tied_embeddings = false;
  }
  GptTrainOptions options;
  options.schedule = c.schedule;
  options.recompute = c.recompute;
  options.optimizer = c.optimizer;
  options.distributed_optimizer = c.distributed_optimizer;
  options.sequence_parallel = c.sequence_parallel;
  options.virtual_stages = c.virtual_stages;
  options.bf16 = c.bf16;
  kernels::reset_allocator_peaks(Device::cpu);
  const std::size_t before = kernels::allocator_stats(Device::cpu).in_use_bytes;
  std::int64_t parameters = 0;
  {
    GptTrainer trainer(config, gpt2_init(3, config.layers, DType::f32, Device::cpu), topology,
                       options);
    parameters = parameter_count(trainer.parameters());
    for (std::int64_t step = 0; step < 2; ++step) {
      std::vector<TokenBatch> batches;
      for (std::int64_t i = 0; i < kMicroBatches; ++i) {
        std::vector<std::int64_t> starts;
        for (std::int64_t j = 0; j < kMicroBatch; ++j)
          starts.push_back((step * 64 + i * kMicroBatch + j) * kSeq);
        batches.push_back(make_token_batch(corpus.tokens(), starts, kSeq, Device::cpu));
      }
      trainer.step(batches, 1e-3);
    }
  }
  return {static_cast<double>(kernels::allocator_stats(Device::cpu).peak_in_use_bytes - before),
          estimate_gpt_memory({config, parameters, kSeq, kMicroBatch, kMicroBatches, tp, pp,
                               topology.pp_rank(), c.schedule, c.recompute,
                               c.optimizer == OptimizerKind::adamw ? 2 : 0, 4, false,
                               c.distributed_optimizer ? dp * c.cp : 1, c.sequence_parallel,
                               c.virtual_stages, c.cp, c.bf16}),
          parameters};
}

TEST(MemoryEstimate, BoundsTheAllocatorsPeakOnEveryTopology) {
  for (const Case c :
       {Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw},
        Case{ScheduleKind::afab, false, OptimizerKind::adamw},
        Case{ScheduleKind::one_f_one_b, true, OptimizerKind::sgd},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, true},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, true},
        Case{ScheduleKind::one_f_one_b, true, OptimizerKind::sgd, false, true},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, false, 2},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, false, 1, true},
        Case{ScheduleKind::one_f_one_b, true, OptimizerKind::adamw, false, true, 1, true},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, true, false, 1, false, 2},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, true, 1, true, 2},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, false, 1, false, 1,
             true},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, true, 1, true, 1, true},
        Case{ScheduleKind::one_f_one_b, true, OptimizerKind::adamw, false, false, 1, true, 1, true},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, false, 1, true, 1, true,
             1024},
        Case{ScheduleKind::one_f_one_b, true, OptimizerKind::adamw, false, false, 1, true, 1, true,
             1024}}) {
    if (test::world().size() % c.cp != 0) continue;
    for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size() / c.cp)) {
      if (!pipeline_layout_error(pp, c.virtual_stages, kMicroBatches).empty() ||
          kLayers % (pp * c.virtual_stages) != 0 || (c.llama && 2 % tp != 0)) {
        continue;
      }
      SCOPED_TRACE(fmt::format(
          "tp {} pp {} dp {}, afab {}, recompute {}, distributed {}, sequence parallel {}, "
          "virtual stages {}, llama {} (ffn {}), cp {}, bf16 {}",
          tp, pp, dp, c.schedule == ScheduleKind::afab, c.recompute, c.distributed_optimizer,
          c.sequence_parallel, c.virtual_stages, c.llama, c.llama_ffn, c.cp, c.bf16));
      const Measured m = train_two_steps(c, tp, pp, dp);
      const double predicted = static_cast<double>(m.estimate.peak() - kRuntimeBytes);
      EXPECT_LE(m.used, predicted);
      EXPECT_GE(m.used, 0.4 * predicted);
    }
  }
}

// Bfloat16 GEMM operands keep the GEMMs' inputs at 2 bytes, the optimizer keeps float32
// masters of the parameters beside them (4 bytes per parameter, unsharded here), and a step holds
// a bfloat16 copy of each weight (2 bytes per parameter): at (1, 1, world) the allocator's peak
// (the logits' moment, with every block's activations kept) moves by at most those 6 bytes per
// parameter less half of what the estimate's activations fall, for GPT-2 and llama.
// With tp or pp > 1 these tiny stages peak elsewhere (at pp 4 a stage's peak rose by 8-12 KiB: a
// GEMM input's bfloat16 copy beside the float32 input during forward), so only the bound above
// is checked there.
TEST(MemoryEstimate, Bfloat16GemmInputsLowerThePeakAsEstimated) {
  const int dp = test::world().size();
  for (Case c :
       {Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw},
        Case{ScheduleKind::one_f_one_b, false, OptimizerKind::adamw, false, false, 1, true}}) {
    SCOPED_TRACE(fmt::format("dp {}, llama {}", dp, c.llama));
    const Measured f32 = train_two_steps(c, 1, 1, dp);
    c.bf16 = true;
    const Measured bf16 = train_two_steps(c, 1, 1, dp);
    const double estimated_saving =
        static_cast<double>(f32.estimate.activations - bf16.estimate.activations);
    const double masters_and_copies = 6.0 * static_cast<double>(bf16.parameters);
    EXPECT_GT(estimated_saving, 0.0);
    EXPECT_EQ(bf16.estimate.parameter_states - f32.estimate.parameter_states, masters_and_copies);
    EXPECT_LE(bf16.used - f32.used, masters_and_copies - 0.5 * estimated_saving)
        << "peak " << f32.used << " -> " << bf16.used << " bytes";
  }
}

}  // namespace
}  // namespace mpitron::nn
