#include "nn/train/memory_estimate.h"

#include <algorithm>
#include <stdexcept>

#include "autograd/ops.h"
#include "nn/layers/vocab_parallel.h"
#include "nn/parallel/data_parallel.h"

namespace mpitron::nn {

std::int64_t MemoryEstimate::peak() const {
  return kRuntimeBytes + std::max(start_up, parameter_states + activations + optimizer_workspace);
}

MemoryEstimate estimate_gpt_memory(const MemoryEstimateInput& in) {
  const GptConfig& c = in.config;
  if (in.seq < 1 || in.cp < 1 || in.seq % in.cp != 0 || in.micro_batch < 1 ||
      in.micro_batches < 1 || in.tp < 1 || in.pp < 1 || in.stage < 0 || in.stage >= in.pp ||
      in.rank_parameters < 0 || in.state_shards < 1 || in.virtual_stages < 1 ||
      c.layers % (in.pp * in.virtual_stages) != 0) {
    throw std::invalid_argument(
        "estimate_gpt_memory: sizes must be >= 1, seq divisible by cp, stage in [0, pp) and layers "
        "divisible by pp x virtual stages");
  }
  const std::int64_t s = in.seq / in.cp, b = in.micro_batch, h = c.hidden, a = c.heads, t = in.tp;
  const std::int64_t sbh = s * b * h;
  // With sequence parallelism the LayerNorms' inputs (the residual stream) are split over TP.
  const std::int64_t block_input = in.sequence_parallel ? sbh / t : sbh;
  // The MLP keeps GPT-2's pre-activation and activation (2 sbf / t, f = 4h: 8 sbh / t), or
  // llama's gate, up and SwiGLU outputs (3 sbf / t).
  const std::int64_t sbf = s * b * c.ffn_size();
  const std::int64_t mlp = (c.llama() ? 3 : 2) * sbf / t;
  const std::int64_t block = 2 * block_input + 2 * sbh + 8 * sbh / t + mlp + a * s * b / t;
  // Of a block's set, what is bfloat16 under --bf16: what only GEMMs keep (the LayerNorms'
  // outputs, the attention output's reshape and llama's SwiGLU output), GPT-2's MLP
  // pre-activation (fused_mlp keeps fc1's product as bfloat16), what keep_activation keeps (the
  // LayerNorms' xhat or RMSNorms' inputs, llama's gate and up) and, without context parallelism,
  // attention's q, k, v and output (scaled_dot_product_attention; ring attention keeps q and its
  // output as float32, and its bfloat16 keys and values count at element_bytes, an upper bound).
  const std::int64_t fused_attention = in.cp == 1 ? 4 * sbh / t : 0;
  const std::int64_t block_bf16 = 2 * block_input + 2 * sbh + sbh / t + sbf / t +
                                  (c.llama() ? 2 * sbf / t : 0) + fused_attention;
  const std::int64_t bf16_bytes = in.bf16 ? 2 : in.element_bytes;
  const std::int64_t block_bytes =
      (block - block_bf16) * in.element_bytes + block_bf16 * bf16_bytes;
  const std::int64_t blocks_in_flight =
      c.layers / (in.pp * in.virtual_stages) *
      chunks_in_flight(in.schedule, in.pp, in.stage, static_cast<int>(in.micro_batches),
                       in.virtual_stages);
  // Ring attention's backward holds, beside a block's set, about 20 [b, a/t, s, h/a] buffers:
  // the shard's key/value pack and the one arriving, their gradients in flight and arriving, dq,
  // a block's dq, dk and dv, their unpacked copies and the concatenated results (16), and the
  // allocator's peak at tp 4, cp 2 of test_memory_estimate's model needs 19 once the logits'
  // gradient no longer takes a buffer of its own.
  const std::int64_t ring_workspace = in.cp > 1 ? 20 * sbh / t : 0;
  // Under bf16 llama's gate and up projections round their output gradients to bfloat16 for
  // their weight gradients (2 bytes each: one float32 sbf / t); attention, the normalizations
  // and SwiGLU read what they kept as bfloat16 as it is.
  const std::int64_t widened = in.bf16 && c.llama() ? sbf / t : 0;
  // Backward's workspace (one block's set, as gradients) and the ring's count element_bytes an
  // element; a recomputed block keeps only its input.
  std::int64_t activations =
      (in.recompute ? blocks_in_flight * block_input * in.element_bytes + block_bytes
                    : blocks_in_flight * block_bytes) +
      (block + ring_workspace + widened) * in.element_bytes;
  if (in.stage == in.pp - 1) {
    // The logits, which their gradient overwrites (vocab_parallel_cross_entropy); bfloat16
    // under --bf16 (the head's output, GptStage::loss), read through a float32 scratch of
    // widened_logits_rows rows.
    const std::int64_t cols = c.vocab_rows() / t;
    const std::int64_t logits = s * b * cols;
    const auto widened_rows = static_cast<std::int64_t>(
        widened_logits_rows(static_cast<std::size_t>(s * b), static_cast<std::size_t>(cols)));
    activations += (block_input + sbh) * bf16_bytes +
                   (in.bf16 ? logits * 2 + widened_rows * cols * 4 : logits * in.element_bytes);
  }
  std::int64_t whole_model = 0;
  for (const ParameterSpec& spec : gpt_parameter_specs(c))
    whole_model += autograd::numel_of(spec.full_shape);
  MemoryEstimate estimate;
  estimate.weights = in.rank_parameters * in.element_bytes;
  // Sharded: every bucket but the last holds kDefaultBucketElements or more, and the tied
  // embedding's own bucket may close one early; each is padded by fewer than state_shards.
  const std::int64_t shards = in.state_shards;
  const std::int64_t padding =
      shards > 1 ? (in.rank_parameters /
                        static_cast<std::int64_t>(DataParallelGradients::kDefaultBucketElements) +
                    3) *
                       shards
                 : 0;
  const std::int64_t flat = in.rank_parameters + padding;
  const std::int64_t sharded_states = in.optimizer_states + (in.bf16 ? 1 : 0);
  const std::int64_t states = 2 * flat + (sharded_states * flat + shards - 1) / shards;
  // Under --bf16 the trainer also holds a bfloat16 copy of each weight (autograd::
  // Bf16WeightCopies, rounded again each step), 2 bytes a parameter.
  estimate.parameter_states = states * in.element_bytes + (in.bf16 ? 2 * in.rank_parameters : 0);
  estimate.activations = activations;
  estimate.optimizer_workspace =
      std::max(c.vocab_rows() * h, c.ffn_size() * h) / t * in.element_bytes;
  estimate.start_up = in.from_file ? 2 * whole_model * in.element_bytes + estimate.parameter_states
                                   : whole_model * in.element_bytes + estimate.weights;
  return estimate;
}

}  // namespace mpitron::nn
