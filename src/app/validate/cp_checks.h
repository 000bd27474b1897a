// The context-parallel checks of `mpitron validate`: zigzag sharding and ring attention over a
// cp ring that spans the world (the checks need no --cp: they build their own ring).
#pragma once

#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// Three checks on a cp ring of every world rank (world size W; causal attention of [2, 2 heads,
/// seq = 2 W 5, head_dim 8] float32 inputs, seeded):
/// - "CP: zigzag shards round trip and hold their positions": the shards of every rank,
///   unsharded, give the sequence back, and this rank's shard holds the rows of its
///   zigzag_positions;
/// - "CP: ring attention forward and backward match dense causal attention": this rank's output
///   rows and its q, k and v gradient rows (of sum(out * w)) against the dense fused attention's
///   rows at its zigzag positions;
/// - "CP: all-gather attention equals ring attention": the same output and gradients from
///   --cp-comm all-gather.
/// Tolerance: the run's (ValidateContext::tolerance). The planted faults cp-zigzag-chunks-swapped,
/// ring-attention-no-lse-correction and ring-attention-dkv-not-returned (W > 1) each fail them.
std::vector<LocalCheck> check_context_parallel(const ValidateContext& ctx);

}  // namespace mpitron::app
