// The KERNELS checks of `mpitron validate`: every kernel and every differentiable op's backward,
// on the selected device in float32, against float64 references written as naive loops in the
// check and gradients by central finite differences or analytically (reference.h), never against
// mpitron's own kernels. They run first: the parallel checks compare two models built from the
// same kernels, so a kernel bug is invisible to them.
#pragma once

#include <vector>

#include "app/validate/context.h"

namespace mpitron::app {

/// "KERNELS: GELU ...", "KERNELS: softmax ...", "KERNELS: linear, matmul and attention core
/// ..." (the unfused core, plain and causal), "KERNELS: element-wise, reduction, loss and shape ops
/// ...", "KERNELS: backward engine ...", then the GPT's kernels (validate_kernels_gpt.h): "KERNELS:
/// LayerNorm ...", "KERNELS: causal and scaled softmax ...", "KERNELS: fused causal attention
/// ..." (the blocked online-softmax kernel at seq 66 and 1, odd head_dim, and the model's
/// attention core through it), "KERNELS: embedding ...",
/// "KERNELS: cross-entropy ...", the Llama family's kernels (kernel_checks_llama.h): "KERNELS:
/// RMSNorm ...", "KERNELS: rotary position embedding ...", "KERNELS: SwiGLU ...", and "KERNELS:
/// AdamW update ...", each "match(es) float64 reference", then the bfloat16 kernels' two
/// (kernel_checks_bf16.h). Inputs reach the edge cases: GELU on [-10, 10], softmax rows with -inf
/// entries, equal entries and logits of +-1000, LayerNorm rows of large offset and small variance,
/// logits of 1e4. Every rank runs them (on its device); none is trivial.
std::vector<LocalCheck> check_kernels(const ValidateContext& ctx);

}  // namespace mpitron::app
