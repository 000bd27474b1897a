// A GPT-2-style language model split over 3-D parallelism: the layers over pipeline stages
// (first stage: embeddings and its blocks; last stage: its blocks, ln_f, the LM head tied to the
// token embedding and the loss), every layer over the tensor-parallel group. See gpt_config.h for
// the model. With v virtual stages (interleaved 1F1B) a stage holds v model chunks of
// layers / (pp v) blocks each: chunk c of stage s holds the blocks from c layers / v +
// s layers / (pp v) on (Megatron-LM's virtual pipeline); the embeddings sit before chunk 0 of
// the first stage, ln_f and the head after chunk v - 1 of the last. With pp > 1 the token embedding
// lives on the first and on the last stage; the two copies start equal and stay equal because their
// gradients are summed over the embedding group before each optimizer step (finalize_gradients), as
// in Megatron-LM. With sequence parallelism (Korthikanti et al. 2022, arXiv:2205.05198) the
// activations between the blocks' TP regions, and those a stage sends to the next, are this rank's
// seq/tp rows [batch, seq/tp, hidden].
#pragma once

#include <optional>
#include <vector>

#include "comm/topology.h"
#include "nn/layers/vocab_parallel.h"
#include "nn/models/gpt_config.h"
#include "nn/models/transformer_block.h"

namespace mpitron::nn {

/// The layers of one pipeline stage, holding this rank's TP shards.
class GptStage {
 public:
  /// Builds stage topology.pp_rank() of the model, with `virtual_stages` model chunks, from the
  /// full tensors `init` returns (each rank slices its shards, so the model does not depend on
  /// the topology; blocks keep their global names). Throws std::invalid_argument when
  /// gpt_size_error(config, tp, pp, virtual_stages) reports one (before any communication).
  /// `sequence_parallel`: split the activations along the sequence over TP between the TP
  /// regions (Megatron-LM's --sequence-parallel). With topology.cp() > 1 every sequence is split
  /// over the context-parallel group (docs/context-parallel.md): the stage sees this rank's
  /// zigzag shard of seq/cp tokens, its position embedding reads their global positions, and its
  /// attention exchanges keys and values by `cp_comm` (with `cp_prefetch` false, waiting for each
  /// ring transfer before computing: ContextParallel::prefetch).
  GptStage(const GptConfig& config, const MasterInit& init, const comm::ParallelTopology& topology,
           bool sequence_parallel = false, int virtual_stages = 1, CpComm cp_comm = CpComm::ring,
           bool cp_prefetch = true);

  /// Model chunk `chunk` (in [0, virtual_stages)). Chunk 0 of the first stage: token ids
  /// (int32/int64) [batch, seq] -> activations [batch, seq, hidden]; every other chunk:
  /// activations -> activations. With sequence parallelism the activations are this rank's rows
  /// [batch, seq/tp, hidden] (the first stage keeps them after the embedding). Under context
  /// parallelism the tokens are this rank's zigzag shard [batch, seq/cp] of sequences of seq
  /// tokens (zigzag_token_batch), and every seq here is the shard's. Throws
  /// std::invalid_argument when the whole sequence exceeds the position table ("sequence length
  /// S is longer than the position table (block size B)"), when sequence parallelism is on and seq
  /// is not divisible by tp ("sequence length S is not divisible by tp T"), when a token id is
  /// outside [0, vocab) or the chunk is outside [0, virtual_stages).
  Tensor forward(const Tensor& input, int chunk = 0) const;

  /// Last stage: activations [batch, seq, hidden] (with sequence parallelism [batch, seq/tp,
  /// hidden], all-gathered after ln_f) -> this rank's logits [batch, seq, Vp/tp] (ln_f, then the
  /// tied head x wte_shard^T; columns >= vocab are padding), float32 for a float32 model, or
  /// with `bf16` bfloat16 (VocabParallelEmbedding::logits).
  Tensor logits(const Tensor& hidden, bool bf16 = false) const;

  /// Last stage: cross-entropy (nats per token) of logits(hidden) against targets (int32/int64)
  /// [batch, seq], summed over the targets that are not kernels::kIgnoreTarget and divided by
  /// `divisor` (0: their count, the mean); the same scalar on every TP rank. Under
  /// kernels::GemmOperands::bfloat16 (train --bf16) a float32 model's logits are bfloat16, the
  /// statistics and the loss float32. Errors as vocab_parallel_cross_entropy.
  Tensor loss(const Tensor& hidden, const Tensor& targets, double divisor = 0.0) const;

  /// This rank's parameters with names and layouts: wte and wpe (first stage), its blocks (chunk
  /// by chunk), ln_f and (pp > 1) the tied wte copy marked tied_copy (last stage).
  Parameters parameters() const;

  const GptConfig& config() const { return config_; }
  /// Model chunks on this stage: 1, or v with interleaved 1F1B.
  int virtual_stages() const { return static_cast<int>(chunks_.size()); }

  /// The activation one stage sends the next for `rows` sequences of `seq` tokens:
  /// [rows, seq, hidden], or with sequence parallelism [rows, seq/tp, hidden]. Throws
  /// std::invalid_argument as forward does when seq is not divisible by tp.
  Shape activation_shape(std::int64_t rows, std::int64_t seq) const;

  /// With `on`, forward keeps only each transformer block's input and backward recomputes the
  /// block's activations (autograd::recompute; Megatron-LM's full recompute): activation
  /// memory per block drops to one [batch, seq, hidden] tensor, for one more forward pass of the
  /// blocks (and their TP all-reduces) in backward. Same values and gradients either way.
  void set_recompute(bool on) { recompute_ = on; }

  /// The device every parameter of this stage lives on.
  Device device() const { return device_; }
  bool is_first() const { return first_; }
  bool is_last() const { return last_; }

 private:
  const VocabParallelEmbedding& head() const { return head_ ? *head_ : *wte_; }
  // Throws when sequence parallelism is on and `seq` is not divisible by tp.
  void check_sequence_split(std::int64_t seq) const;

  GptConfig config_;
  Device device_;
  comm::Communicator tp_;
  ContextParallel cp_;
  bool first_, last_;
  bool sequence_parallel_;
  bool recompute_ = false;
  std::optional<VocabParallelEmbedding> wte_;          // first stage
  Tensor wpe_;                                         // first stage, gpt2
  std::vector<std::vector<TransformerBlock>> chunks_;  // [chunk][block in the chunk]
  std::optional<Norm> ln_f_;                           // last stage
  std::optional<VocabParallelEmbedding> head_;  // last stage: lm_head, or when pp > 1 the tied copy
};

/// The number of elements of `parameters`, counting each tied copy too (what a rank holds).
std::int64_t parameter_count(const Parameters& parameters);

}  // namespace mpitron::nn
