// The KERNELS checks of the GPT's own kernels (LayerNorm, causal and scaled softmax, embedding,
// cross-entropy, AdamW), in the style of validate_kernels.h: float32 on the selected device
// against float64 naive loops and central finite differences (validate_reference.h).
#pragma once

#include <vector>

#include "app/validate/reference.h"

namespace mpitron::app {

/// layer_norm of x [2, 2, 8] with weight and bias [8] (eps 1e-5; gradients of x, weight and
/// bias): two rows in [-2, 2], one of 100 + [-2, 2] (large offset, small variance: a one-pass
/// float32 variance E[x^2] - mean^2 misses the tolerance about 100-fold, while the float32
/// rounding of the mean, which no float32 kernel avoids, stays below it) and one in
/// [-2e-3, 2e-3] (variance below eps).
std::vector<OpCase> layer_norm_cases();

/// softmax(x, causal = true, scale 0.35) of x [2, 2, 4, 4] (matrices: random, all entries equal,
/// +1000 above the diagonal over -1000 on and below it, random in [-40, 40]), and the non-causal
/// scaled softmax (scale 0.125) of [3, 5] with entries up to +-1000.
std::vector<OpCase> causal_softmax_cases();

/// embedding of weight [5, 3] by int64 ids [2, 4] with repeats (scatter-add must accumulate), and
/// embedding_slice of rows [2, 5) of a table by int32 ids, some outside the slice (zero rows, no
/// gradient).
std::vector<OpCase> embedding_cases();

/// cross_entropy of logits [5, 6] against int64 targets: two random rows, one of magnitude 1e4
/// with a tie at the max, one with all logits equal, one whose target logit is -1e4 (loss 2e4).
/// It runs row_max, cross_entropy_stats, cross_entropy_loss and cross_entropy_backward (the
/// vocab-parallel pieces) with the whole vocabulary as the slice. Twice more with ignored
/// targets (kernels::kIgnoreTarget: no loss, a zero gradient row): the 1e4 row ignored with an
/// explicit divisor of 8, and a random row and the all-equal row ignored (divisor 0: the mean
/// over the three counted rows).
std::vector<OpCase> cross_entropy_cases();

/// "KERNELS: AdamW update (one step) matches float64 reference of torch.optim.AdamW":
/// kernels::adamw_update on float32 buffers of ctx.device, once at step 1 from zero moments
/// (gradients down to 1e-7, where eps matters, and exact zeros) and once at step 10 from nonzero
/// moments, against a float64 loop of torch.optim.AdamW's formula; compares the parameter
/// update (new - old, so the comparison is scale-aware for the update itself), exp_avg and
/// exp_avg_sq.
LocalCheck check_adamw(const ValidateContext& ctx);

}  // namespace mpitron::app
