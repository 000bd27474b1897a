// The vocabulary split over the tensor-parallel group: the token embedding, the LM head tied to
// it, and the cross-entropy computed on vocab-sharded logits without gathering them.
// Shoeybi et al., "Megatron-LM", arXiv:1909.08053, sec. 3 (embedding and output layer), and
// Megatron-LM's VocabParallelEmbedding / vocab_parallel_cross_entropy.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// Token embedding whose rows (the vocabulary) are split over `tp`: rank t holds rows
/// [t V/tp, (t+1) V/tp) of the full table [V, hidden].
class VocabParallelEmbedding {
 public:
  /// `master` [V, hidden], the full table (the same on every rank). Throws
  /// std::invalid_argument "... vocab V is not divisible by tp T" before any communication.
  VocabParallelEmbedding(const Tensor& master, const comm::Communicator& tp);

  /// tokens (int32/int64) [...] -> [..., hidden], identical on every TP rank: each rank looks up
  /// the tokens of its slice (zero rows for the others), then the results are all-reduced.
  /// Throws std::invalid_argument "embedding: token id X at position i is outside [0, V)" (the
  /// same on every TP rank, before any communication).
  Tensor forward(const Tensor& tokens) const;

  /// The tied LM head: x [..., hidden] (identical on every TP rank) -> this rank's logits
  /// [..., V/tp] = x W_shard^T; the input gradient is all-reduced over TP in backward.
  Tensor logits(const Tensor& x) const;

  /// This rank's rows [V/tp, hidden] (split_dim 0).
  const Tensor& weight() const { return weight_; }

  /// Index of this rank's first vocabulary row.
  std::int64_t first_row() const { return first_row_; }

 private:
  comm::Communicator tp_;
  std::int64_t vocab_;
  std::int64_t first_row_;
  Tensor weight_;
};

/// Mean cross-entropy over all positions of logits split along the vocabulary over `tp`:
/// logits [..., V/tp] are this rank's columns [t V/tp, (t+1) V/tp), targets (int32/int64) [...]
/// hold full-vocabulary ids. Forward all-reduces the row max (max), the sum of exp(logit - max)
/// and the target's logit (sums), so no rank ever holds [..., V]; backward is local:
/// (softmax - onehot) * grad / positions on this rank's columns. Returns the same scalar on
/// every TP rank. Throws std::invalid_argument when leading dims differ or a target is outside
/// [0, V) (every TP rank sees the same targets and raises the same error).
Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets,
                                    const comm::Communicator& tp);

}  // namespace mpitron::nn
