#include "app/validate/gpt_checks.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/data/zigzag.h"
#include "nn/layers/tp_mappings.h"
#include "nn/models/gpt_reference.h"
#include "nn/parallel/gradients.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::app {

using autograd::Tensor;

namespace {

// The bf16 GPT check's tolerances. Both sides round the same float32 values to bfloat16 (the
// parameters, the GEMM operands, the activations train --bf16 keeps, and with pp > 1 the stage
// boundaries, which the dense model rounds through autograd::round_through_bf16) except where
// their float32 summation orders (fused vs unfused attention and MLP, the micro-batches) move a
// value across a rounding boundary: that value then differs by one bfloat16 ulp, up to 2^-7 of
// it. The error of an element is a few such ulps of the values summed into it, which scale with
// the tensor's largest values, not with the element, so the bounds are per tensor only
// (Tolerance::elementwise false): an element-wise atol of 1e-3 failed wpe's gradient (scale 0.15,
// whose bfloat16 ulp is 9.8e-4) at 4 of 100 seeds at tp 2. The parallel rules themselves are
// held to 1e-4 by the float32 checks of the same topology; these bounds stay 6x or more below a
// whole gradient missing or doubled (max_rel_error 1), all but attention's q and k (2x).
//
// tp 1: max_rel_error at most 5.3e-3 over seeds 0-29 at (1,1,1), 4.8e-3 at (1,2,1) and 9.9e-3 at
// (1,1,2) (0-19), 5.2e-3 at (1,4,1) (0-9) (2-core Zen 5, 2026-12-06); 2e-2 keeps a 2x margin.
// Since the dense model runs the fused attention (2026-12-07) the two share attention's
// roundings: 8.8e-5 at (1,1,1) and 6.7e-5 at (1,1,2) (seeds 0-9).
constexpr Tolerance kBf16Tolerance{0.0, 0.0, 2e-2, false};
// tp > 1, where the TP mappings carry bfloat16: each rank's partial sum is rounded before the sum
// is, which the dense model, having no partial sums, can only round once
// (nn::DenseBf16Rounding::tp_collectives), so the two models' activations land an ulp apart
// where the roundings differ, and more partial sums and more roundings of their combinations
// (log2(tp) for recursive doubling) move them further. Every gradient but attention's q and k
// (bf16_query_key_tolerance), max_rel_error over seeds (2-core Zen 5, 2026-12-06): at most
// 3.7e-2 at (2,1,1) (seeds 0-99) and 2.6e-2 at (2,2,2) (0-29); 4.6e-2 at (4,1,1) (0-99), 3.8e-2
// at (4,2,1) (0-19) and 7.2e-2 at (8,1,1) (0-39); at 8 layers x 256 (0-3) 9.0e-3 at (2,2,2) and
// 1.3e-2 at (4,1,1). 7.5e-2 at tp 2 and 1.5e-1 above keep a 2x margin; at tp 2 the bound fails
// transfers that lose the tail of their last message (the planted chunk-tail-dropped: 9.5e-2
// with SP). The TP wire itself is checked bit for bit by test_nn_mpi's TpMappingsBf16.
Tolerance bf16_tp_tolerance(int tp) {
  return {0.0, 0.0, tp == 2 ? 7.5e-2 : 1.5e-1, false};
}
// cp > 1 at tp 1: the attention's products round the probabilities P = exp(S - running max) to
// bfloat16 (FlashAttention-2's), which ring attention does per block of a rank's query and key
// chunks and the dense model's fused attention per 64 x 64 tile of the whole sequence: their
// running maxima differ, so P's roundings land on neighbouring values. Every gradient but
// attention's q and k, max_rel_error over seeds (2-core Zen 5, 2026-12-07): at most 2.24e-2 at
// cp 2, ring and all-gather (seeds 0-29 and 0-19), 2.1e-2 with pp 2, 1.8e-2 with dp 2 and 2.6e-2
// at cp 4 (0-11); 5e-2 keeps a 1.9x margin. (tp 2 cp 2: 2.5e-2 and 6.0e-2 for q and k, within
// the tp bounds.)
constexpr Tolerance kBf16CpTolerance{0.0, 0.0, 5e-2, false};
// Attention's q and k weights' and q bias's gradients at tp > 1, a check of their own. Backward
// reads attention's output O rounded to bfloat16, as train --bf16 keeps it (FlashAttention's
// bfloat16 backward does the same), in D = rowsum(dO O), which enters the scores' gradient as
// dP - D; the dense model runs the same fused attention, but where the two models' inputs differ
// by the partial sums' roundings their rounded outputs land an ulp apart.
// Near-uniform attention makes these gradients small beside that noise (block 3's q bias at
// (4,1,1), seed 2: scale 5.9e-4, error 1.4e-4, while its v bias's gradient is 2.1e-2).
// max_rel_error over the seeds above: at most 8.6e-2 at (2,1,1), 7.1e-2 at (2,2,2), 2.29e-1 at
// (4,1,1) (seed 2; the next largest 1.67e-1), 1.1e-1 at (4,2,1), 2.59e-1 at (8,1,1); at 8 layers
// x 256 (seeds 0-3) 5.3e-2 at (2,2,2) and 2.57e-1 at (4,1,1). 2.5e-1 at tp 2 and 5e-1 above keep
// a 1.9x margin or more and still fail a q or k gradient missing, doubled or of the wrong sign.
// At tp 1 with cp > 1 (P rounded in other blocks, above): at most 5.7e-2 over the same seeds,
// bounded at 1.25e-1.
Tolerance bf16_query_key_tolerance(int tp) {
  return {0.0, 0.0, tp == 1 ? 1.25e-1 : tp == 2 ? 2.5e-1 : 5e-1, false};
}
// The main-gradient check's tolerance: the same bfloat16 products on both sides, summed over
// the micro-batches in float32 (trainer) or float64 (check), so only float32 rounding of m
// partial sums differs: measured at most 1.2e-7 of the largest gradient at the topologies above.
// Gradients accumulated in bfloat16 (the planted fault) are off by 2^-9 per accumulation,
// measured 4.2e-3 to 5.1e-3.
constexpr Tolerance kMainGradientTolerance{1e-5, 1e-7, 1e-5};

// 2 tp heads (two a rank) where that leaves each head 4 wide or more, else tp: heads 2 wide
// (hidden 32 at tp 8) make the bf16 check's q and k gradients rounding noise (up to 4.6e-1 of
// them over 20 seeds; 1.1e-1 4 wide).
nn::GptConfig gpt_config(const ValidateContext& ctx) {
  const std::int64_t hidden = ctx.sizes.hidden, tp = ctx.topology.tp();
  const std::int64_t heads = hidden % (2 * tp) == 0 && hidden / (2 * tp) >= 4 ? 2 * tp : tp;
  return {kValidateVocab, ctx.sizes.seq, ctx.sizes.layers, hidden, heads};
}

// The llama family at validate's sizes: GPT's heads on half as many key/value heads where tp
// still divides them (else as many), ffn 3 hidden, an untied head.
nn::GptConfig llama_config(const ValidateContext& ctx) {
  nn::GptConfig config = gpt_config(ctx);
  config.arch = nn::Arch::llama;
  config.kv_heads = (config.heads / 2) % ctx.topology.tp() == 0 ? config.heads / 2 : config.heads;
  config.ffn_hidden = 3 * config.hidden;
  config.tied_embeddings = false;
  return config;
}

// Seeded ids [rows, seq] in [0, kValidateVocab).
Tensor random_ids(const ValidateContext& ctx, std::int64_t rows, std::uint64_t seed_offset) {
  std::vector<std::int64_t> ids;
  const auto values = autograd::uniform({rows, ctx.sizes.seq}, ctx.seed + seed_offset, 0.0, 1.0,
                                        autograd::DType::f64)
                          .to_vector();
  for (const double u : values)
    ids.push_back(static_cast<std::int64_t>(u * kValidateVocab));
  return Tensor::from_indices(ids, {rows, ctx.sizes.seq}, ctx.device);
}

// Every parameter shard's gradient against the dense gradient of the same name, sliced. The
// attention k bias's gradient is exactly zero in exact arithmetic (q . b_k is added to every
// score of a row, which leaves its softmax unchanged), so both sides, rounding noise, are
// compared with zero instead of with each other. With `query_key`, the attention q projection's
// and k weight's gradients go there instead of to `comparison`.
void expect_gradients(Comparison& comparison, const nn::Parameters& local,
                      const nn::TensorMap& dense, const comm::ParallelTopology& topo,
                      Comparison* query_key = nullptr) {
  for (const nn::Parameter& p : local) {
    const Tensor expected =
        nn::tp_slice(dense.at(p.name).grad(), p.split_dim, topo.tp_rank(), topo.tp());
    if (p.name.ends_with("attn.k.bias")) {
      const Tensor zero = Tensor::zeros(expected.shape(), expected.dtype(), expected.device());
      comparison.expect_close(p.tensor.grad(), zero);
      comparison.expect_close(expected, zero);
    } else if (query_key != nullptr &&
               (p.name.ends_with("attn.q.weight") || p.name.ends_with("attn.q.bias") ||
                p.name.ends_with("attn.k.weight"))) {
      query_key->expect_close(p.tensor.grad(), expected);
    } else {
      comparison.expect_close(p.tensor.grad(), expected);
    }
  }
}

// sqrt of the sum of squares of every gradient in `parameters` (one process: the dense model).
double dense_gradient_norm(const nn::Parameters& parameters) {
  double sum = 0.0;
  for (const nn::Parameter& p : parameters) {
    for (const double g : p.tensor.grad().to_vector())
      sum += g * g;
  }
  return std::sqrt(sum);
}

// The block over the TP group against the dense block; with `sequence_parallel` each rank feeds
// its seq/tp rows, its output and input gradient are compared with those rows of the dense
// ones, the loss is each rank's rows' share summed over TP, and the LayerNorm and row-parallel
// bias gradients are summed over TP as finalize_gradients does.
LocalCheck transformer_block_check(const ValidateContext& ctx, bool sequence_parallel) {
  const comm::ParallelTopology& topo = ctx.topology;
  const nn::GptConfig config = gpt_config(ctx);
  const nn::MasterInit init =
      ctx.masters->random_init(ctx.seed + 900, autograd::DType::f32, ctx.device);
  const nn::TransformerBlock block(config, 0, init, topo.tp_comm(), sequence_parallel);
  const nn::TensorMap dense = nn::dense_gpt_parameters(config, init);
  log_parameters(ctx.log, "tp transformer block shards", block.parameters());
  const auto rows = [&](const Tensor& t) {
    return sequence_parallel ? nn::tp_slice(t, 1, topo.tp_rank(), topo.tp()) : t;
  };
  const Tensor input = make_activation(ctx, 91, 1.0), target = make_activation(ctx, 92, 0.5);
  Tensor parallel_input = rows(input).clone().set_requires_grad();
  Tensor dense_input = input.clone().set_requires_grad();
  const Tensor output = block.forward(parallel_input);
  const Tensor reference = nn::dense_gpt_block(dense, 0, config.heads, dense_input);
  Tensor loss = autograd::mse_loss(output, rows(target));
  if (sequence_parallel) {
    loss = nn::reduce_from_tp(autograd::scale(loss, 1.0 / topo.tp()), topo.tp_comm());
  }
  const Tensor reference_loss = autograd::mse_loss(reference, target);
  loss.backward();
  reference_loss.backward();
  nn::sum_sequence_parallel_gradients(block.parameters(), topo.tp_comm());

  LocalCheck check{std::string(sequence_parallel ? "TP+SP" : "TP") +
                       ": transformer block forward and gradients match dense reference",
                   Comparison(ctx.tolerance), trivial_at("tp", topo.tp())};
  check.comparison.expect_close(output.detach(), rows(reference.detach()));
  check.comparison.expect_close(loss.detach(), reference_loss.detach());
  check.comparison.expect_close(parallel_input.grad(), rows(dense_input.grad()));
  expect_gradients(check.comparison, block.parameters(), dense, topo);
  return check;
}

// The whole GPT over the topology against the dense GPT (check_gpt), with or without sequence
// parallelism, with ctx.virtual_stages model chunks per stage; with `bf16`, both sides' GEMMs
// multiply bfloat16 operands (check_gpt_bf16).
// Each row of `ids` [rows, seq] with the targets at cp rank 0's zigzag positions (of
// max(cp, 2) shards) set to kernels::kIgnoreTarget (check_gpt_ignored_targets).
Tensor ignore_first_shard(const Tensor& ids, int cp) {
  const std::int64_t rows = ids.size(0), seq = ids.size(1);
  std::vector<std::int64_t> values;
  for (const double v : ids.to_vector())
    values.push_back(static_cast<std::int64_t>(v));
  for (const std::int64_t position : nn::zigzag_positions(seq, std::max(cp, 2), 0)) {
    for (std::int64_t r = 0; r < rows; ++r)
      values[static_cast<std::size_t>(r * seq + position)] = kernels::kIgnoreTarget;
  }
  return Tensor::from_indices(values, ids.shape(), ids.device());
}

std::vector<LocalCheck> gpt_check(const ValidateContext& ctx, bool sequence_parallel,
                                  bool bf16 = false, bool llama = false,
                                  bool ignored_targets = false) {
  const comm::ParallelTopology& topo = ctx.topology;
  const nn::GptConfig config = llama ? llama_config(ctx) : gpt_config(ctx);
  const kernels::GemmOperandsScope operands(bf16 ? kernels::GemmOperands::bfloat16
                                                 : kernels::GemmOperands::float32);
  const std::uint64_t seed = ctx.seed + (bf16              ? 1200
                                         : llama           ? 1300
                                         : ignored_targets ? 1400
                                                           : 1000);
  const nn::MasterInit init = ctx.masters->random_init(seed, autograd::DType::f32, ctx.device);
  // `batch` sequences per replica, as in the MLP checks; the dense reference sees all of them.
  const std::int64_t rows = ctx.sizes.batch * topo.dp();
  const Tensor targets = random_ids(ctx, rows, 1002);
  const nn::TokenBatch batch{random_ids(ctx, rows, 1001),
                             ignored_targets ? ignore_first_shard(targets, topo.cp()) : targets};
  // Under bf16 the stages exchange bfloat16 (PipelineSpec::bf16_wire) and at tp > 1 the TP
  // mappings carry bfloat16: the dense model rounds where the virtual stages split and where
  // the TP collectives round, forward and backward. The cache keys by seed: only the bf16 check
  // draws seed + 1200, once per topology and chunk count.
  const std::int64_t wire_blocks =
      bf16 && topo.pp() > 1 ? config.layers / (topo.pp() * ctx.virtual_stages) : 0;
  const DenseGptReferences::Reference& reference = ctx.dense_gpt->get(seed, rows, [&] {
    nn::TensorMap dense = nn::dense_gpt_parameters(config, init);
    // Under bf16 the trainer's forward reads its parameters rounded to bfloat16 (float32 masters
    // in the optimizer), and so does the dense model's.
    for (auto& [name, tensor] : dense) {
      if (bf16) kernels::round_to_bf16(tensor.buffer(), tensor.buffer());
    }
    const Tensor loss = nn::dense_gpt_loss(config, dense, batch.inputs, batch.targets,
                                           {wire_blocks, bf16 && topo.tp() > 1, bf16});
    loss.backward();
    return DenseGptReferences::Reference{std::move(dense), loss.detach()};
  });
  const nn::TensorMap& dense = reference.parameters;
  const Tensor& dense_loss = reference.loss;

  nn::GptTrainOptions options;
  options.device = ctx.device;
  options.schedule = ctx.schedule;
  options.cp_comm = ctx.cp_comm;
  options.sequence_parallel = sequence_parallel;
  options.virtual_stages = ctx.virtual_stages;
  options.bf16 = bf16;
  nn::GptTrainer trainer(config, init, topo, options);
  log_parameters(ctx.log, "gpt shards", trainer.parameters());
  const nn::StepResult result = trainer.forward_backward(
      nn::replica_micro_batches(batch, topo.dp(), topo.dp_rank(), ctx.sizes.micro_batches));

  const std::string prefix =
      micro_batch_prefix(std::string(sequence_parallel ? "COMBINED+SP" : "COMBINED") +
                             (topo.cp() > 1 ? "+CP" : "") + (bf16 ? " bf16" : "") +
                             (llama ? " llama" : "") + (ignored_targets ? " ignored targets" : ""),
                         ctx.sizes.micro_batches, ctx.schedule, ctx.virtual_stages);
  const bool trivial = topo.world().size() == 1 && ctx.sizes.micro_batches == 1 && !ignored_targets;
  LocalCheck check{
      prefix + "GPT loss and gradients match dense " + (bf16 ? "bf16 reference" : "reference"),
      Comparison(!bf16           ? ctx.tolerance
                 : topo.tp() > 1 ? bf16_tp_tolerance(topo.tp())
                 : topo.cp() > 1 ? kBf16CpTolerance
                                 : kBf16Tolerance),
      topo.cp() > 1       ? ""
      : sequence_parallel ? trivial_at("tp", topo.tp())
      : trivial           ? "tp 1, pp 1, dp 1"
                          : ""};
  check.comparison.expect_close(Tensor::full({}, result.loss, autograd::DType::f64),
                                dense_loss.to(kernels::Device::cpu));
  if (!bf16 || (topo.tp() == 1 && topo.cp() == 1)) {
    expect_gradients(check.comparison, trainer.parameters(), dense, topo);
    return {check};
  }
  LocalCheck query_key{prefix + "GPT attention q and k gradients match dense bf16 reference",
                       Comparison(bf16_query_key_tolerance(topo.tp())), ""};
  expect_gradients(check.comparison, trainer.parameters(), dense, topo, &query_key.comparison);
  return {check, query_key};
}

// check_gpt_bf16's second check: under bfloat16 operands, the gradients accumulated over the
// micro-batches against the sum of each micro-batch's own gradients (the same products, so the
// same bfloat16 roundings), in float64.
LocalCheck main_gradient_check(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const nn::GptConfig config = gpt_config(ctx);
  const kernels::GemmOperandsScope operands(kernels::GemmOperands::bfloat16);
  const nn::MasterInit init =
      ctx.masters->random_init(ctx.seed + 1200, autograd::DType::f32, ctx.device);
  const std::int64_t rows = ctx.sizes.batch * topo.dp();
  const nn::TokenBatch batch{random_ids(ctx, rows, 1201), random_ids(ctx, rows, 1202)};
  nn::GptTrainOptions options;
  options.device = ctx.device;
  options.schedule = ctx.schedule;
  options.cp_comm = ctx.cp_comm;
  options.bf16 = true;
  nn::GptTrainer trainer(config, init, topo, options);
  const int m = ctx.sizes.micro_batches;
  const std::vector<nn::TokenBatch> micro_batches =
      nn::replica_micro_batches(batch, topo.dp(), topo.dp_rank(), m);
  const nn::Parameters& parameters = trainer.parameters();
  std::vector<std::vector<double>> sums(parameters.size());
  for (const nn::TokenBatch& micro_batch : micro_batches) {
    trainer.forward_backward({micro_batch});  // weighted 1: the step weighs each 1 / m
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const std::vector<double> g = parameters[i].tensor.grad().to_vector();
      sums[i].resize(g.size(), 0.0);
      for (std::size_t j = 0; j < g.size(); ++j)
        sums[i][j] += g[j] / m;
    }
  }
  trainer.forward_backward(micro_batches);
  LocalCheck check{micro_batch_prefix("COMBINED bf16", m, ctx.schedule, ctx.virtual_stages) +
                       "float32 main gradients: the accumulated equal the sum of the "
                       "micro-batches' own",
                   Comparison(kMainGradientTolerance), m == 1 ? "1 micro-batch" : ""};
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    // The k bias's gradient is rounding noise (expect_gradients), not a sum to compare.
    if (parameters[i].name.ends_with("attn.k.bias")) continue;
    check.comparison.expect_close(parameters[i].tensor.grad().to_vector(), sums[i]);
  }
  return check;
}

}  // namespace

std::vector<LocalCheck> check_transformer_block(const ValidateContext& ctx) {
  return {transformer_block_check(ctx, false), transformer_block_check(ctx, true)};
}

std::vector<LocalCheck> check_vocab_parallel(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  // A padded table: rows [vocab, kValidateVocab) are padding, random (not zero) so that any use of
  // them shows; at tp 8 the last rank's slice is padding only.
  const std::int64_t hidden = ctx.sizes.hidden, slice = kValidateVocab / topo.tp();
  const std::int64_t vocab = kValidateVocab - 40;
  const Tensor master = autograd::randn({kValidateVocab, hidden}, ctx.seed + 950, 0.5,
                                        autograd::DType::f32, ctx.device);
  const nn::VocabParallelEmbedding embedding(master, vocab, topo.tp_comm());
  const Tensor dense_weight = master.clone().set_requires_grad();
  // Tokens walk through every slice; targets sit on slice boundaries (first and last ids).
  std::vector<std::int64_t> tokens, targets;
  const std::int64_t n = ctx.sizes.batch * ctx.sizes.seq;
  for (std::int64_t i = 0; i < n; ++i) {
    tokens.push_back((i * 37 + 5) % vocab);
    const std::int64_t boundary = std::min((i % topo.tp()) * slice, vocab - 1);
    targets.push_back(i % 2 == 0 ? boundary : (boundary + vocab - 1) % vocab);
  }
  const autograd::Shape shape{ctx.sizes.batch, ctx.sizes.seq};
  const Tensor ids = Tensor::from_indices(tokens, shape, ctx.device);
  const Tensor labels = Tensor::from_indices(targets, shape, ctx.device);

  const Tensor x = embedding.forward(ids);
  const Tensor logits = embedding.logits(x);
  const Tensor loss = nn::vocab_parallel_cross_entropy(logits, labels, vocab, topo.tp_comm());
  const Tensor dense_x = autograd::embedding(dense_weight, ids);
  const Tensor dense_logits = autograd::linear(dense_x, dense_weight);
  const Tensor dense_loss =
      autograd::cross_entropy(autograd::narrow(dense_logits, 2, 0, vocab), labels);
  loss.backward();
  dense_loss.backward();

  LocalCheck check{"TP: vocab-parallel embedding and cross-entropy match dense reference",
                   Comparison(ctx.tolerance), trivial_at("tp", topo.tp())};
  check.comparison.expect_close(x.detach(), dense_x.detach());
  check.comparison.expect_close(logits.detach(),
                                nn::tp_slice(dense_logits.detach(), 2, topo.tp_rank(), topo.tp()));
  check.comparison.expect_close(loss.detach(), dense_loss.detach());
  check.comparison.expect_close(embedding.weight().grad(),
                                nn::tp_slice(dense_weight.grad(), 0, topo.tp_rank(), topo.tp()));
  return {check};
}

std::vector<LocalCheck> check_gpt(const ValidateContext& ctx) {
  return gpt_check(ctx, false);
}

std::vector<LocalCheck> check_gpt_sequence_parallel(const ValidateContext& ctx) {
  return gpt_check(ctx, true);
}

std::vector<LocalCheck> check_gpt_llama(const ValidateContext& ctx) {
  return gpt_check(ctx, ctx.topology.tp() > 1, false, true);
}

std::vector<LocalCheck> check_gpt_ignored_targets(const ValidateContext& ctx) {
  if (ctx.sizes.seq % (2 * std::max(ctx.topology.cp(), 2)) != 0) {
    return {LocalCheck{micro_batch_prefix("COMBINED ignored targets", ctx.sizes.micro_batches,
                                          ctx.schedule, ctx.virtual_stages) +
                           "GPT loss and gradients match dense reference",
                       Comparison(ctx.tolerance),
                       fmt::format("--seq {} not divisible by 4", ctx.sizes.seq)}};
  }
  return gpt_check(ctx, false, false, false, true);
}

std::vector<LocalCheck> check_gpt_bf16(const ValidateContext& ctx) {
  std::vector<LocalCheck> checks = gpt_check(ctx, ctx.topology.tp() > 1, true);
  if (ctx.topology.tp() > 1) {
    for (LocalCheck& check : gpt_check(ctx, false, true))
      checks.push_back(std::move(check));
  }
  checks.push_back(main_gradient_check(ctx));
  return checks;
}

std::vector<LocalCheck> check_distributed_optimizer(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  const nn::GptConfig config = gpt_config(ctx);
  const nn::MasterInit init =
      ctx.masters->random_init(ctx.seed + 1100, autograd::DType::f32, ctx.device);
  nn::TensorMap dense = nn::dense_gpt_parameters(config, init);
  nn::Parameters dense_parameters;
  for (auto& [name, tensor] : dense)
    dense_parameters.push_back({name, tensor});
  // eps 1e-3: the attention k bias's gradient is rounding noise (zero in exact arithmetic), which
  // a tiny eps would turn into a full-size step in a direction each side draws differently.
  nn::GptTrainOptions options;
  options.device = ctx.device;
  options.schedule = ctx.schedule;
  options.cp_comm = ctx.cp_comm;
  options.distributed_optimizer = true;
  options.adamw.eps = 1e-3;
  nn::AdamW dense_adamw(dense_parameters, options.lr, options.adamw);
  nn::GptTrainer trainer(config, init, topo, options);

  // Under context parallelism the state is sharded over dp x cp, so cp > 1 is never trivial.
  LocalCheck check{"DP: distributed optimizer (ZeRO-1) AdamW steps match dense reference",
                   Comparison(ctx.tolerance),
                   topo.cp() > 1 ? std::string() : trivial_at("dp", topo.dp())};
  const std::int64_t rows = ctx.sizes.batch * topo.dp();
  for (std::uint64_t step = 0; step < 2; ++step) {
    const nn::TokenBatch batch{random_ids(ctx, rows, 1101 + 2 * step),
                               random_ids(ctx, rows, 1102 + 2 * step)};
    const nn::StepResult result =
        trainer.step(nn::replica_micro_batches(batch, topo.dp(), topo.dp_rank(), 1), options.lr);
    dense_adamw.zero_grad();
    const Tensor dense_loss = nn::dense_gpt_loss(config, dense, batch.inputs, batch.targets);
    dense_loss.backward();
    const double dense_norm = dense_gradient_norm(dense_parameters);
    nn::clip_gradients(dense_parameters, dense_norm, options.grad_clip);
    dense_adamw.step();
    check.comparison.expect_close(Tensor::full({}, result.loss, autograd::DType::f64),
                                  dense_loss.detach().to(kernels::Device::cpu));
    check.comparison.expect_close(Tensor::full({}, result.grad_norm, autograd::DType::f64),
                                  Tensor::full({}, dense_norm, autograd::DType::f64));
  }
  for (const nn::Parameter& p : trainer.parameters()) {
    check.comparison.expect_close(
        p.tensor, nn::tp_slice(dense.at(p.name).detach(), p.split_dim, topo.tp_rank(), topo.tp()));
  }
  return {check};
}

}  // namespace mpitron::app
