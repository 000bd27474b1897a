// The vocabulary split over the tensor-parallel group: the token embedding, the LM head tied to
// it, and the cross-entropy computed on vocab-sharded logits without gathering them.
// Shoeybi et al., "Megatron-LM", arXiv:1909.08053, sec. 3 (embedding and output layer), and
// Megatron-LM's VocabParallelEmbedding / vocab_parallel_cross_entropy.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/communicator.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// Token embedding whose rows are split over `tp`: rank t holds rows [t Vp/tp, (t+1) Vp/tp) of
/// the full table [Vp, hidden], whose first V rows are the vocabulary and the rest padding
/// (llm.c's padded vocabulary; Vp = V without padding).
class VocabParallelEmbedding {
 public:
  /// `master` [Vp, hidden], the full table (the same on every rank); `vocab` V <= Vp. Throws
  /// std::invalid_argument "... vocab Vp is not divisible by tp T" or when vocab is outside
  /// [1, Vp], before any communication.
  VocabParallelEmbedding(const Tensor& master, std::int64_t vocab, const comm::Communicator& tp);

  /// tokens (int32/int64) [...] -> [..., hidden], identical on every TP rank: each rank looks up
  /// the tokens of its slice (zero rows for the others), then the results are all-reduced.
  /// Throws std::invalid_argument "embedding: token id X at position i is outside [0, V)" (the
  /// same on every TP rank, before any communication).
  Tensor forward(const Tensor& tokens) const;

  /// The tied LM head: x [..., hidden] (identical on every TP rank) -> this rank's logits
  /// [..., Vp/tp] = x W_shard^T, padding columns included (vocab_parallel_cross_entropy leaves
  /// them out); the input gradient is all-reduced over TP in backward. With `sequence_parallel`,
  /// x is this rank's rows [batch, seq/tp, hidden], all-gathered along seq first, and the logits
  /// are [batch, seq, Vp/tp] (the input gradient is reduce-scattered instead; Korthikanti et al.
  /// 2022, arXiv:2205.05198, sec. 4.2.2). Throws std::invalid_argument as
  /// gather_from_sequence_parallel_region does. With `bf16` (a float32 x and table) the logits
  /// are bfloat16, each the float32 sum of bfloat16 products rounded once
  /// (autograd::linear_bf16_output), as a bfloat16 run's output layer writes them (Megatron-LM
  /// --bf16, llm.c): half the bytes, and their gradient as well.
  Tensor logits(const Tensor& x, bool sequence_parallel = false, bool bf16 = false) const;

  /// This rank's rows [Vp/tp, hidden] (split_dim 0).
  const Tensor& weight() const { return weight_; }

  /// Index of this rank's first row.
  std::int64_t first_row() const { return first_row_; }

  /// V, the vocabulary (the table's used rows).
  std::int64_t vocab() const { return vocab_; }

 private:
  comm::Communicator tp_;
  std::int64_t vocab_;
  std::int64_t first_row_;
  Tensor weight_;
};

/// The most bytes of float32 that vocab_parallel_cross_entropy widens bfloat16 logits into.
inline constexpr std::size_t kWidenedLogitsBytes = std::size_t{16} << 20;

/// The rows of bfloat16 logits [rows, cols] that vocab_parallel_cross_entropy widens at once:
/// as many as kWidenedLogitsBytes of float32 hold, at most an eighth of the rows (so the scratch
/// adds at most a quarter of the bfloat16 logits' bytes), at least one.
std::size_t widened_logits_rows(std::size_t rows, std::size_t cols);

/// Cross-entropy of logits split along the (padded) vocabulary over `tp`: logits [..., Vp/tp]
/// (float32, float64, or bfloat16: read widened to float32 in chunks of widened_logits_rows
/// rows, with float32 statistics, loss and arithmetic, and a bfloat16 gradient) are this rank's
/// columns [t
/// Vp/tp, (t+1) Vp/tp), targets (int32/int64) [...] hold ids in [0, vocab) or
/// kernels::kIgnoreTarget; columns >= vocab are padding and take no part in the max, the sum or the
/// gradient (which is 0 there). The result is the sum of -log softmax(logits)[target] over the
/// positions whose target is not ignored, divided by `divisor`; divisor 0 means the count of
/// targets not ignored (the mean over them), and when every target is ignored the loss and the
/// gradient are 0, never NaN. A context-parallel shard passes the global token count, so the
/// shards' losses add up to the sequence's mean. Forward all-reduces the row max (max), the sum of
/// exp(logit - max) and the target's logit (sums), so no rank ever holds [..., V]; backward is
/// local: (softmax - onehot) * grad / divisor on this rank's columns, a zero row for an ignored
/// target, written over the logits when the loss holds the only handle on them
/// (autograd::storage_is_exclusive: the LM head's [..., Vp/tp] is then held once, not twice).
/// Returns the same scalar on every TP rank. Throws std::invalid_argument when leading dims differ,
/// vocab is outside [1, Vp], divisor is negative or not finite, or a target is neither in [0,
/// vocab) nor kIgnoreTarget (as autograd::cross_entropy_divisor words it; every TP rank sees the
/// same targets and raises the same error, before any communication).
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t vocab,
                                    const comm::Communicator& tp, double divisor = 0.0);

}  // namespace mpitron::nn
