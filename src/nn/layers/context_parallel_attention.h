// Causal attention over a sequence split across the context-parallel (cp) group: each cp rank
// holds the zigzag shard of the queries, keys and values (chunks c and 2cp-1-c of 2cp equal
// chunks; nn/data/zigzag.h) and attends to the keys of the whole sequence. Ring attention (Liu
// et al., "Ring Attention with Blockwise Transformers", arXiv:2310.01889) passes the key/value
// shards around the cp ring; the all-gather form (Megatron-LM's and Llama 3's baseline) gathers
// them once. Both compute only the causal blocks: against its own shard a rank computes chunk c
// against chunk c (causal), chunk 2cp-1-c against chunk c (full) and against itself (causal);
// against rank s < c's shard, both its chunks against s's first chunk (full); against s > c's,
// its second chunk against both of s's (full). Every rank thus computes 2cp chunk-by-chunk
// products and the same work. Partial results merge with their log-sum-exps in the dtype of the
// tensors (kernels::attention_merge); backward recomputes each block from the merged log-sum-exp
// (kernels::attention_backward), keeps dQ local and returns the key/value gradients to the rank
// that owns the keys: around the ring after the keys, or by one reduce-scatter.
#pragma once

#include <optional>
#include <string>

#include "autograd/tensor.h"
#include "comm/communicator.h"

namespace mpitron::nn {

using autograd::Tensor;

/// How the key/value shards reach every cp rank (train --cp-comm).
enum class CpComm {
  /// ring: cp - 1 steps of a send to rank c + 1 and a receive from c - 1, the next shard's
  /// transfer posted before the current shard's blocks are computed; backward sends the shards
  /// again, and the key/value gradients travel one step behind them back to their owner.
  ring,
  /// all-gather: one all-gather of the key/value shards before the blocks, again in backward,
  /// and one reduce-scatter (sum) of the key/value gradients.
  all_gather,
};

/// The context-parallel group of a layer: the ranks that hold the zigzag shards of one sequence
/// (comm::ParallelTopology::cp_comm) and how the key/value shards move between them. An empty
/// communicator, or one of one rank, keeps the whole sequence on this rank.
struct ContextParallel {
  comm::Communicator group;
  CpComm how = CpComm::ring;
  /// false: each ring transfer is waited for before the blocks run (context_parallel_attention's
  /// `prefetch`), to measure what the overlap hides
  bool prefetch = true;
  /// cp, the number of shards of a sequence: the group's size, or 1 without a group.
  int size() const { return group.valid() ? group.size() : 1; }
  /// c, this rank's shard: its rank in the group, or 0 without a group.
  int rank() const { return group.valid() ? group.rank() : 0; }
};

/// "ring" or "all-gather".
std::string cp_comm_name(CpComm how);

/// The CpComm named `name` ("ring", "all-gather"), or nothing.
std::optional<CpComm> parse_cp_comm(const std::string& name);

/// What context_parallel_attention's calls on this thread have spent, in seconds since the last
/// reset: computing attention blocks (forward and backward) and waiting for key/value transfers
/// (time in wait calls, after the overlapped computation). For bench and the balance check.
struct CpAttentionTimes {
  double compute_s = 0.0;
  double wait_s = 0.0;
};
/// This thread's running totals.
CpAttentionTimes& cp_attention_times();

/// Causal softmax(scale q k^T) v for this rank's zigzag shard: q, k, v and the result are
/// [batch, heads, seq/cp, head_dim] (the rows of positions zigzag_positions(seq, cp, c), c =
/// cp.rank()), any float dtype and device, and each row equals the dense causal attention's row
/// at its global position. Differentiable in q, k and v. `prefetch` false waits for each ring
/// transfer before computing (the measurement of what the overlap hides). Collective over `cp`:
/// every rank must call it with the same shapes. cp of size 1 is the fused causal attention in
/// two chunks. Under kernels::GemmOperands::bfloat16 (train --bf16) float32 keys and values cross
/// the wire, and are kept for backward, as bfloat16 (half the bytes; rounded, which is exact for
/// the bfloat16 values context_parallel_attention_core passes) and are widened for the kernels;
/// their gradients travel in float32. Throws std::invalid_argument when the shapes differ, are
/// not 4-D or seq/cp is odd;
/// transfers fail as comm's point-to-point and collectives do (shape mismatches between ranks
/// name both ranks, a missing rank ends at the deadline).
Tensor context_parallel_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const comm::Communicator& cp, CpComm how, double scale,
                                  bool prefetch = true);

}  // namespace mpitron::nn
