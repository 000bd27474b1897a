// Zigzag sharding of the sequence for context parallelism: the sequence is cut into 2*cp equal
// chunks and context rank c keeps chunks c and 2*cp-1-c, so that under the causal mask every rank
// holds one early and one late chunk and does the same attention work (the load balancing of
// Megatron-LM's context parallelism and picotron; ring attention is Liu et al.
// arXiv:2310.01889).
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/tensor.h"
#include "nn/data/token_corpus.h"

namespace mpitron::nn {

/// Throws std::invalid_argument with one line unless cp >= 1, 0 <= rank < cp and
/// seq % (2*cp) == 0, e.g. "seq 10 does not split into 2*cp = 4 equal zigzag chunks".
void check_zigzag(std::int64_t seq, int cp, int rank);

/// The global positions in [0, seq) that context rank `rank` of `cp` keeps, in its local order:
/// chunk `rank` then chunk 2*cp-1-rank, each of seq/(2*cp) positions; [seq/cp]. Errors as
/// check_zigzag.
std::vector<std::int64_t> zigzag_positions(std::int64_t seq, int cp, int rank);

/// Context rank `rank`'s shard of x [batch, seq, ...] along dim 1: [batch, seq/cp, ...], rows in
/// zigzag_positions order. Any dtype and device; not differentiable (a data-layout step). Throws
/// std::invalid_argument for x of fewer than 2 dims and as check_zigzag.
Tensor zigzag_shard(const Tensor& x, int cp, int rank);

/// The inverse of zigzag_shard: shards[c] = zigzag_shard(x, cp, c) for c in [0, cp), each
/// [batch, seq/cp, ...], gives x [batch, seq, ...]. Throws std::invalid_argument when the list
/// is empty or the shards differ in shape, dtype or device.
Tensor zigzag_unshard(const std::vector<Tensor>& shards);

/// One context rank's share of a batch of sequences.
struct ZigzagTokenBatch {
  /// inputs and targets (int64) [batch, seq/cp]: the targets were shifted by one token on the
  /// whole sequence before sharding, so a shard's last target is the next chunk's first input.
  TokenBatch tokens;
  /// The global positions of the shard's tokens (int64) [seq/cp], for the position embedding.
  Tensor positions;
};

/// Context rank `rank`'s zigzag shard of `global` (inputs and targets [batch, seq]). Errors as
/// zigzag_shard.
ZigzagTokenBatch zigzag_token_batch(const TokenBatch& global, int cp, int rank);

}  // namespace mpitron::nn
