// Multi-head self-attention, dense and tensor-parallel. Vaswani et al., "Attention Is All You
// Need", arXiv:1706.03762, sec. 3.2; the tensor-parallel split follows Shoeybi et al.,
// "Megatron-LM", arXiv:1909.08053, sec. 3: q, k and v projections are column-parallel (each TP
// rank owns heads/tp whole heads), the output projection is row-parallel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "kernels/rope.h"
#include "nn/layers/context_parallel_attention.h"
#include "nn/layers/linear.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// The full (unsharded) weights of one attention block, each [embed, embed] with bias [embed].
struct AttentionWeights {
  LinearWeights q, k, v, out;
};

/// Seeded weights: projection i (q, k, v, out = 0..3) has weight ~ N(0, 1/embed) from
/// seed + i and bias ~ N(0, 0.1^2) from seed + 100 + i, so activations stay O(1).
/// Throws std::invalid_argument when embed < 1.
AttentionWeights make_attention_weights_normal(std::int64_t embed, std::uint64_t seed, DType dtype,
                                               Device device);

/// The reference program's deterministic weights: weight = arange(embed*embed) reshaped
/// [embed, embed] + offset, bias = arange(embed) + offset, with offsets 0.1, -0.2, 0.3, -0.4
/// for q, k, v, out. Values reach embed^2 (exact in float32 up to embed 4096), so outputs are
/// huge and are compared with relative tolerances. Throws std::invalid_argument when embed < 1.
AttentionWeights make_attention_weights_arange(std::int64_t embed, DType dtype, Device device);

/// The message of the first violated size rule, or nothing when `embed`, `heads` and `tp` fit:
/// a "must be >= 1" message, "--heads H is not divisible by tp T", or "--embed E is not
/// divisible by --heads H" (named as the attention subcommand's flags), checked in that order.
std::optional<std::string> attention_size_error(std::int64_t embed, std::int64_t heads, int tp);

/// Scaled dot-product attention of projected activations, for `heads` heads:
/// q, k, v [batch, seq, heads*head_dim] -> softmax(q_h k_h^T / sqrt(head_dim)) v_h per head,
/// reassembled as [batch, seq, heads*head_dim], through the fused kernel
/// (autograd::scaled_dot_product_attention: blocked online softmax, no [seq, seq] scores kept
/// for backward). With `causal`, position i attends to positions j <= i only (a decoder;
/// Vaswani et al. sec. 3.2.3), without a mask tensor. The attention of every model layer.
/// Throws std::invalid_argument when the last dim is not divisible by heads or shapes differ.
Tensor multi_head_attention_core(const Tensor& q, const Tensor& k, const Tensor& v,
                                 std::int64_t heads, bool causal = false);

/// The same attention composed of unfused ops, matmul(softmax(matmul(q_h, k_h^T), causal,
/// 1/sqrt(head_dim)), v_h), which materialize the [batch, heads, seq, seq] probabilities: the
/// independent form the references use (MultiHeadAttention, the dense GPT of gpt_reference.h),
/// so the fused kernel is always checked against something it does not share. Arguments and
/// errors as multi_head_attention_core.
Tensor unfused_attention_core(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t heads,
                              bool causal = false);

/// RoPE on projected activations: x [batch, seq, heads head_dim] viewed as [batch, seq, heads,
/// head_dim], each head rotated by autograd::rotary_embedding at frequencies `rope` (a base
/// theta, or theta with Llama 3's scaling; kernels/rope.h) from position 0, and returned as
/// [batch, seq, heads head_dim]. Under context parallelism (`cp` of size > 1) x holds the
/// zigzag shard [batch, seq/cp, heads head_dim] of rank cp.rank(), and each of its two chunks
/// is rotated from its global first position (nn/data/zigzag.h). Throws as rotary_embedding
/// does.
Tensor rotary_heads(const Tensor& x, std::int64_t heads, const kernels::RopeFrequencies& rope,
                    const ContextParallel& cp = {});

/// The causal attention of multi_head_attention_core over a sequence split over `cp`: q, k, v
/// [batch, seq/cp, heads head_dim] are rank cp.rank()'s zigzag shards, and the result
/// [batch, seq/cp, heads head_dim] holds the dense causal attention's rows at the shard's
/// positions (context_parallel_attention, by cp.how). At cp size 1 it is
/// multi_head_attention_core(q, k, v, heads, true). Under kernels::GemmOperands::bfloat16 it
/// reads float32 q, k and v as bfloat16 (autograd::read_as_bf16), the values the fused core reads
/// there. Collective over cp.group. Throws as multi_head_attention_core and
/// context_parallel_attention do.
Tensor context_parallel_attention_core(const Tensor& q, const Tensor& k, const Tensor& v,
                                       std::int64_t heads, const ContextParallel& cp);

/// Grouped-query attention's key/value heads for the query heads: x [batch, seq, kv_heads
/// head_dim] -> [batch, seq, kv_heads group head_dim], key/value head g repeated as heads
/// g group .. g group + group - 1 (Hugging Face's repeat_kv); the gradient sums over the
/// copies. `group` 1 returns x.
Tensor repeat_kv_heads(const Tensor& x, std::int64_t kv_heads, std::int64_t group);

/// Dense multi-head attention owning copies of `weights`: x [batch, seq, embed] ->
/// out(attention(q(x), k(x), v(x))) [batch, seq, embed], causal when constructed so. The
/// reference that the tensor-parallel layer is checked against: its attention is
/// unfused_attention_core.
class MultiHeadAttention {
 public:
  /// Throws std::invalid_argument when attention_size_error(embed, heads, 1) reports one.
  MultiHeadAttention(const AttentionWeights& weights, std::int64_t heads, bool causal = false);
  Tensor forward(const Tensor& x) const;
  /// q.weight, q.bias, k.weight, k.bias, v.weight, v.bias, out.weight, out.bias.
  Parameters parameters() const;

 private:
  std::int64_t heads_;
  bool causal_;
  Linear q_, k_, v_, out_;
};

/// The heads of one attention layer: `heads` query heads, `kv_heads` key/value heads (0:
/// heads; fewer is grouped-query attention, query head j reading key/value head
/// j / (heads / kv_heads); Ainslie et al., arXiv:2305.13245), and RoPE's frequencies `rope`
/// (theta 0: no rotary embedding; otherwise q and k are rotated by autograd::rotary_embedding
/// from position 0 before the scores).
struct AttentionHeads {
  AttentionHeads(std::int64_t heads, std::int64_t kv_heads = 0, kernels::RopeFrequencies rope = 0.0)
      : heads(heads), kv_heads(kv_heads > 0 ? kv_heads : heads), rope(rope) {}
  std::int64_t heads;
  std::int64_t kv_heads;
  kernels::RopeFrequencies rope;
};

/// Tensor-parallel multi-head attention over `tp`: rank t owns heads
/// [t heads/tp, (t+1) heads/tp), i.e. rows [t embed/tp, (t+1) embed/tp) of the q, k and v
/// weights and biases, and the same columns of the output weight; the output bias is
/// replicated and added once after the all-reduce. The output equals the dense block's on every
/// TP rank; `causal` as in MultiHeadAttention (heads are independent, so masking is local).
/// The input enters the TP region once for all three projections (enter_tp_region). With
/// grouped-query attention k and v are [kv_heads head_dim, embed], rank t owns key/value heads
/// [t kv_heads/tp, (t+1) kv_heads/tp), which are the ones its query heads read; each is
/// repeated for its heads / kv_heads query heads before the fused attention. Biases are
/// optional (LinearWeights).
class ParallelMultiHeadAttention {
 public:
  /// Throws std::invalid_argument when attention_size_error(embed, heads, tp.size()) reports
  /// one, or when kv_heads does not divide heads or tp does not divide kv_heads (before any
  /// communication). With `sequence_parallel` the input and output are this rank's seq/tp rows
  /// (Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2).
  /// With `cp` of size > 1 (causal only) the sequence is split over the context-parallel
  /// group: the layer sees rank cp.rank()'s zigzag shard, rotates it at its global positions and
  /// attends with context_parallel_attention_core.
  ParallelMultiHeadAttention(const AttentionWeights& master, AttentionHeads heads,
                             const comm::Communicator& tp, bool causal = false,
                             bool sequence_parallel = false, ContextParallel cp = {});
  /// x [batch, seq, embed] (the same on every TP rank) -> [batch, seq, embed]; with sequence
  /// parallelism x [batch, seq/tp, embed] -> [batch, seq/tp, embed] (attention over the whole
  /// all-gathered sequence). Under context parallelism seq is the shard's seq/cp. Throws
  /// std::invalid_argument as the mappings do.
  Tensor forward(const Tensor& x) const;
  /// q/k/v.weight [embed/tp, embed], q/k/v.bias [embed/tp], out.weight [embed, embed/tp],
  /// out.bias [embed], in MultiHeadAttention's order.
  Parameters parameters() const;

 private:
  comm::Communicator tp_;
  std::int64_t local_heads_, local_kv_heads_;
  kernels::RopeFrequencies rope_;
  bool causal_;
  bool sequence_parallel_;
  ContextParallel cp_;
  ColumnParallelLinear q_, k_, v_;
  RowParallelLinear out_;
};

}  // namespace mpitron::nn
