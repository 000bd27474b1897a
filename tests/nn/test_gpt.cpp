// The GPT on every topology of the test world: loss and every parameter shard's gradient after
// finalize_gradients against the dense single-process model (nn/models/gpt_reference.h) and against
// PyTorch (tests/data/gpt.json from tools/make_golden_gpt.py), also with activation recomputation;
// the same for the llama family (tests/data/llama.json from tools/make_golden_llama_model.py).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "autograd/random.h"
#include "gpt_test_support.h"
#include "nn/models/gpt_reference.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::nn {
namespace {

// Random ids [rows, cols] in [0, vocab).
Tensor random_ids(std::int64_t rows, std::int64_t cols, std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int64_t> ids;
  for (const double u : autograd::uniform({rows, cols}, seed, 0.0, 1.0, DType::f64).to_vector()) {
    ids.push_back(static_cast<std::int64_t>(u * static_cast<double>(vocab)));
  }
  return Tensor::from_indices(ids, {rows, cols});
}

// The loss and the finalized gradients of `init`'s parameters on this topology, compared with
// `expected_loss` and `expected_grad(name)` (full tensors) by normalised error.
template <class ExpectedGrad>
void expect_step_matches(const GptConfig& config, const MasterInit& init, int tp, int pp, int dp,
                         ScheduleKind schedule, std::int64_t micro_batches, const Tensor& tokens,
                         const Tensor& targets, double expected_loss, ExpectedGrad expected_grad,
                         DType dtype, double tolerance, bool recompute = false) {
  SCOPED_TRACE(fmt::format("tp {} pp {} dp {}, {} micro-batches, {}{}", tp, pp, dp, micro_batches,
                           to_string(schedule), recompute ? ", recomputing activations" : ""));
  const comm::ParallelTopology topology(test::world(), tp, pp, dp);
  GptTrainOptions options;
  options.schedule = schedule;
  options.dtype = dtype;
  options.recompute = recompute;
  GptTrainer trainer(config, init, topology, options);
  const StepResult result = trainer.forward_backward(
      replica_micro_batches({tokens, targets}, dp, topology.dp_rank(), micro_batches));
  EXPECT_LE(std::abs(result.loss - expected_loss), tolerance * std::abs(expected_loss));
  for (const Parameter& p : trainer.parameters()) {
    SCOPED_TRACE(p.name);
    if (p.name.ends_with("attn.k.bias")) {
      // Exactly zero in exact arithmetic (q.b_k is the same for every key, and softmax ignores
      // a constant per row): both sides hold rounding noise, about 1e-17 in float64 and 1e-9
      // in float32, so only its size is checked.
      for (const double g : p.tensor.grad().to_vector())
        EXPECT_LE(std::abs(g), 1e-6);
      continue;
    }
    const Tensor expected = test::slice_of(expected_grad(p.name), p, topology.tp_rank(), tp);
    EXPECT_LE(test::max_rel_error(p.tensor.grad(), expected), tolerance);
  }
}

// Float64 everywhere: the parallel model does the dense model's arithmetic in another order
// (split GEMMs, all-reduced partial sums, micro-batch accumulation), so results agree to
// rounding; 1e-10 of each tensor's scale leaves room for accumulation over a few thousand terms.
TEST(Gpt, LossAndGradientsMatchTheDenseModelOnEveryTopology) {
  const GptConfig config{256, 8, 4, 16, 4};
  const MasterInit init = random_init(7, DType::f64, Device::cpu);
  const Tensor tokens = random_ids(8, 8, config.vocab, 11);
  const Tensor targets = random_ids(8, 8, config.vocab, 12);
  const TensorMap dense = dense_gpt_parameters(config, init);
  const Tensor loss = dense_gpt_loss(config, dense, tokens, targets);
  loss.backward();
  for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
    for (const ScheduleKind schedule : {ScheduleKind::afab, ScheduleKind::one_f_one_b}) {
      for (const std::int64_t micro_batches : {1, 2}) {
        expect_step_matches(
            config, init, tp, pp, dp, schedule, micro_batches, tokens, targets, loss.item(),
            [&](const std::string& name) { return dense.at(name).grad(); }, DType::f64, 1e-10);
      }
    }
    // Activation recomputation: the same step, with each block run again in backward.
    expect_step_matches(
        config, init, tp, pp, dp, ScheduleKind::one_f_one_b, 2, tokens, targets, loss.item(),
        [&](const std::string& name) { return dense.at(name).grad(); }, DType::f64, 1e-10,
        /*recompute=*/true);
  }
}

// llm.c's padded vocabulary and GPT-2's tanh GELU: vocab 200 in a table of 256 rows gives, on
// every topology, the loss and gradients of the dense model of vocab 200 without padding (its
// wte gradient padded with zero rows), to the same 1e-10 as above.
TEST(Gpt, APaddedVocabularyComputesTheUnpaddedModel) {
  GptConfig config{200, 8, 4, 16, 4};
  config.gelu = GeluForm::tanh;
  const MasterInit init = random_init(9, DType::f64, Device::cpu);
  const Tensor tokens = random_ids(8, 8, config.vocab, 13);
  const Tensor targets = random_ids(8, 8, config.vocab, 14);
  const TensorMap dense = dense_gpt_parameters(config, init);
  const Tensor loss = dense_gpt_loss(config, dense, tokens, targets);
  loss.backward();
  GptConfig padded = config;
  padded.padded_vocab = 256;
  const auto expected_grad = [&](const std::string& name) {
    const Tensor grad = dense.at(name).grad();
    return name == "transformer.wte.weight" ? fit_vocab_rows(grad, config.vocab, 256) : grad;
  };
  for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
    expect_step_matches(padded, init, tp, pp, dp, ScheduleKind::one_f_one_b, 2, tokens, targets,
                        loss.item(), expected_grad, DType::f64, 1e-10);
  }
}

// PyTorch parity. Float64: 1e-9 of each tensor's scale (two float64 implementations of the
// same formulas, different summation orders). Float32: 2e-4, the rounding of float32
// activations through two blocks and a 256-way softmax, measured well below (about 2e-5).
TEST(Gpt, LossAndGradientsMatchPyTorchOnEveryTopology) {
  const test::GoldenFile golden("gpt.json");
  const GptConfig config{256, 16, 2, 32, 4};
  const Tensor tokens = test::golden_ids(golden, "tokens"),
               targets = test::golden_ids(golden, "targets");
  for (const auto& [dtype, tolerance] : {std::pair{DType::f64, 1e-9}, {DType::f32, 2e-4}}) {
    for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
      if (config.layers % pp != 0) continue;
      expect_step_matches(
          config, test::golden_init(golden, dtype), tp, pp, dp, ScheduleKind::one_f_one_b, 1,
          tokens, targets, golden.scalar("loss"),
          [&](const std::string& name) { return golden.tensor("grad." + name); }, dtype, tolerance);
    }
  }
}

// A llama config of the test sizes: RMSNorm, RoPE, SwiGLU, no biases; 8 heads sharing 4
// key/value heads (head size 4), ffn 24, tied or untied.
GptConfig llama_config(bool tied) {
  GptConfig config{256, 8, 4, 32, 8};
  config.arch = Arch::llama;
  config.kv_heads = 4;
  config.ffn_hidden = 24;
  config.tied_embeddings = tied;
  return config;
}

// The llama family on every topology its sizes allow (tp divides the 4 key/value heads):
// against its dense model, float64, the same 1e-10 as GPT-2's; also with recomputation.
TEST(Gpt, LlamaLossAndGradientsMatchTheDenseModelOnEveryTopology) {
  for (const bool tied : {true, false}) {
    const GptConfig config = llama_config(tied);
    const MasterInit init = random_init(17, DType::f64, Device::cpu);
    const Tensor tokens = random_ids(8, 8, config.vocab, 21);
    const Tensor targets = random_ids(8, 8, config.vocab, 22);
    const TensorMap dense = dense_gpt_parameters(config, init);
    const Tensor loss = dense_gpt_loss(config, dense, tokens, targets);
    loss.backward();
    const auto expected_grad = [&](const std::string& name) { return dense.at(name).grad(); };
    for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
      if (gpt_size_error(config, tp, pp)) continue;
      SCOPED_TRACE(tied ? "tied" : "untied");
      expect_step_matches(config, init, tp, pp, dp, ScheduleKind::one_f_one_b, 2, tokens, targets,
                          loss.item(), expected_grad, DType::f64, 1e-10);
      expect_step_matches(config, init, tp, pp, dp, ScheduleKind::afab, 1, tokens, targets,
                          loss.item(), expected_grad, DType::f64, 1e-10, /*recompute=*/true);
    }
  }
}

// PyTorch parity for the llama family (tests/data/llama.json from
// tools/make_golden_llama_model.py: Hugging Face Llama's formulas in plain torch, untied head,
// 4 heads on 2 key/value heads), with GPT-2's tolerances: 1e-9 in float64, 2e-4 in float32.
TEST(Gpt, LlamaLossAndGradientsMatchPyTorchOnEveryTopology) {
  const test::GoldenFile golden("llama.json");
  GptConfig config{256, 16, 2, 32, 4};
  config.arch = Arch::llama;
  config.kv_heads = 2;
  config.ffn_hidden = 48;
  config.tied_embeddings = false;
  const Tensor tokens = test::golden_ids(golden, "tokens"),
               targets = test::golden_ids(golden, "targets");
  for (const auto& [dtype, tolerance] : {std::pair{DType::f64, 1e-9}, {DType::f32, 2e-4}}) {
    for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
      if (gpt_size_error(config, tp, pp)) continue;
      expect_step_matches(
          config, test::golden_init(golden, dtype), tp, pp, dp, ScheduleKind::one_f_one_b, 1,
          tokens, targets, golden.scalar("loss"),
          [&](const std::string& name) { return golden.tensor("grad." + name); }, dtype, tolerance);
    }
  }
}

// Every parameter of every stage of `config` on every topology it allows has its spec's name,
// layout and (sliced) shape; only a tied head's copy on the last stage is a tied copy.
void expect_parameters_carry_their_specs(const GptConfig& config) {
  for (const auto& [tp, pp, dp] : test::topologies_of(test::world().size())) {
    if (gpt_size_error(config, tp, pp)) continue;
    const comm::ParallelTopology topology(test::world(), tp, pp, dp);
    const GptStage stage(config, gpt2_init(1, config.layers, DType::f32, Device::cpu), topology);
    for (const Parameter& p : stage.parameters()) {
      SCOPED_TRACE(p.name);
      bool found = false;
      for (const ParameterSpec& spec : gpt_parameter_specs(config)) {
        if (spec.name != p.name) continue;
        found = true;
        EXPECT_EQ(p.split_dim, spec.split_dim);
        autograd::Shape expected = spec.full_shape;
        if (spec.split_dim != kReplicated) expected[static_cast<std::size_t>(spec.split_dim)] /= tp;
        EXPECT_EQ(p.tensor.shape(), expected);
      }
      EXPECT_TRUE(found);
      EXPECT_EQ(p.tied_copy, config.tied_embeddings && p.name == "transformer.wte.weight" &&
                                 pp > 1 && topology.is_last_stage());
    }
  }
}

TEST(Gpt, ParametersCarryTheirNamesAndLayouts) {
  for (const GptConfig& config : {GptConfig{256, 8, 4, 16, 4}, llama_config(false)}) {
    expect_parameters_carry_their_specs(config);
  }
}

TEST(Gpt, BadSizesAndIdsAreOneLineErrors) {
  const comm::ParallelTopology topology(test::world(), 1, 1, test::world().size());
  const auto init = gpt2_init(1, 2, DType::f32, Device::cpu);
  EXPECT_THROW(GptStage(GptConfig{256, 8, 2, 18, 4}, init, topology), std::invalid_argument);
  const GptStage stage(GptConfig{256, 8, 2, 16, 4}, init, topology);
  try {
    stage.forward(random_ids(1, 9, 256, 1));
    ADD_FAILURE() << "a sequence longer than the position table was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "GPT: sequence length 9 is longer than the position table (block size 8)");
  }
  try {
    stage.forward(Tensor::from_indices({3, 256}, {1, 2}));
    ADD_FAILURE() << "token id 256 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "embedding: token id 256 at position 1 is outside [0, 256)");
  }
}

TEST(GptSizes, EveryRuleHasItsMessage) {
  EXPECT_EQ(gpt_size_error({256, 8, 4, 16, 4}, 2, 2), std::nullopt);
  EXPECT_EQ(gpt_size_error({256, 8, 4, 18, 4}, 1, 1), "hidden 18 is not divisible by heads 4");
  EXPECT_EQ(gpt_size_error({256, 8, 4, 16, 4}, 8, 1), "heads 4 is not divisible by tp 8");
  EXPECT_EQ(gpt_size_error({255, 8, 4, 16, 2}, 2, 1), "vocab 255 is not divisible by tp 2");
  EXPECT_EQ(gpt_size_error({256, 8, 3, 16, 4}, 1, 2), "layers 3 is not divisible by pp 2");
  EXPECT_EQ(gpt_size_error({256, 0, 4, 16, 4}, 1, 1), "block size must be >= 1, got 0");
  GptConfig llama = llama_config(true);
  EXPECT_EQ(gpt_size_error(llama, 4, 1), std::nullopt);
  EXPECT_EQ(gpt_size_error(llama, 8, 1),
            "kv heads 4 is not divisible by tp 8 (each TP rank holds whole key/value heads)");
  llama.kv_heads = 3;
  EXPECT_EQ(gpt_size_error(llama, 1, 1), "heads 8 is not divisible by kv heads 3");
  llama.kv_heads = 4;
  llama.ffn_hidden = 25;
  EXPECT_EQ(gpt_size_error(llama, 2, 1), "ffn hidden 25 is not divisible by tp 2");
  llama.ffn_hidden = 24;
  llama.hidden = 24;
  EXPECT_EQ(gpt_size_error(llama, 1, 1),
            "head size 3 (hidden 24 / heads 8) is odd; rotary embedding pairs halves");
  GptConfig gpt2{256, 8, 4, 16, 4};
  gpt2.kv_heads = 2;
  EXPECT_EQ(gpt_size_error(gpt2, 1, 1),
            "kv heads, ffn hidden and untied embeddings are llama choices (gpt2: kv heads = "
            "heads, ffn hidden = 4 hidden, tied)");
}

// The estimate's N is the weights of every matmul: counted here from the parameter list (each
// 2-D weight; wte stands for the tied LM head, wpe is only gathered), times 6 for forward and
// backward; attention adds 2 matmuls of [seq, head_dim] x [head_dim, seq] size per head, i.e.
// 4 C seq per token forward, times 3.
TEST(GptSizes, FlopsPerTokenCountEveryMatmul) {
  const GptConfig config{16, 4, 2, 8, 2};
  double matmul_weights = 0.0;
  for (const ParameterSpec& spec : gpt_parameter_specs(config)) {
    if (spec.full_shape.size() == 2 && spec.name != "transformer.wpe.weight") {
      matmul_weights += static_cast<double>(spec.full_shape[0] * spec.full_shape[1]);
    }
  }
  EXPECT_EQ(matmul_weights, 12.0 * 2 * 8 * 8 + 16 * 8);
  const double attention = 3.0 * 4.0 * 8 * 4 * 2;
  EXPECT_DOUBLE_EQ(gpt_flops_per_token(config, 4), 6.0 * matmul_weights + attention);
}

// Closed form at a size where each term is easy to count: layers 2, C 8, 2 heads, vocab 16,
// block 4; tp 2, pp 1; 3 micro-batches of 2 sequences of 4 tokens in flight; float32.
TEST(GptSizes, StepMemoryEstimateCountsWeightsStatesAndActivations) {
  const GptConfig config{16, 4, 2, 8, 2};
  const double parameters = (2 * (12.0 * 64 + 13 * 8)) / 2 + (16 + 4) * 8 / 2.0;
  // Per block s b (34 C + 2 a) half-precision bytes: no [s, s] attention term (fused attention).
  const double activations_per_block = 4 * 2 * (34 * 8 + 2.0 * 2) * 2 / 2.0;
  EXPECT_DOUBLE_EQ(gpt_step_memory_bytes(config, 2, 1, 2, 4, 3, 4),
                   4 * parameters * 4 + activations_per_block * 2 * 3);
  // Recomputation: 2 blocks x 3 micro-batches keep their [2, 4, 8] float32 input, plus one
  // block's activations.
  EXPECT_DOUBLE_EQ(gpt_step_memory_bytes(config, 2, 1, 2, 4, 3, 4, true),
                   4 * parameters * 4 + 2 * 4 * 8 * 4.0 * 2 * 3 + activations_per_block);
  // The distributed optimizer at dp 4: weights, gradients and a quarter of the two moments.
  EXPECT_DOUBLE_EQ(gpt_step_memory_bytes(config, 2, 1, 2, 4, 3, 4, false, 4),
                   2.5 * parameters * 4 + activations_per_block * 2 * 3);
  EXPECT_GT(gpt_step_memory_bytes({256, 16, 1000000, 64, 4}, 1, 1, 1, 16, 1, 4), 1e11);
}

}  // namespace
}  // namespace mpitron::nn
