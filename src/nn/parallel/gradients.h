// What happens to gradients between backward and the optimizer step: the one place that
// reduces them across groups (Megatron-LM's finalize_model_grads), and global-norm clipping.
#pragma once

#include "comm/topology.h"
#include "nn/parallel/data_parallel.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// The name of the parameter that has a tied copy on another pipeline stage (the token
/// embedding, reused by the LM head on the last stage).
inline constexpr const char* kTiedEmbedding = "transformer.wte.weight";

/// Every cross-group gradient reduction after backward, in this order:
/// 1. Data parallel: every gradient is averaged over the DP group (`gradients.finish()`: the
///    buckets whose all-reduce did not start during backward start, and all are waited for).
/// 2. Tied embedding: with pp > 1 the token embedding's gradient on the first stage and that of
///    its tied copy on the last stage are summed over the embedding group, so both copies get
///    the gradient of the tied weight and stay equal (parameters named kTiedEmbedding; only
///    when `tied_embeddings`: an untied model's last stage holds its own LM head instead).
/// 3. Sequence parallelism: sum_sequence_parallel_gradients over the TP group.
/// Otherwise TP needs no reduction here: split parameters own their slice's gradient, and
/// replicated ones (LayerNorms, row-parallel biases, wpe) get identical gradients on every TP
/// rank. Collective over the embedding group, the DP group and (with a parameter marked
/// sequence_parallel) the TP group; call it on every rank.
void finalize_gradients(const Parameters& parameters, const comm::ParallelTopology& topology,
                        DataParallelGradients& gradients, bool tied_embeddings = true);

/// In place: the gradient of every parameter marked Parameter::sequence_parallel (LayerNorm
/// weights and biases, row-parallel biases [hidden]) is summed over `tp`, as each TP rank's holds
/// the contribution of its seq/tp rows only (Korthikanti et al. 2022, arXiv:2205.05198,
/// sec. 4.2.2; Megatron-LM's _allreduce_layernorm_grads, the bug class of Megatron-LM#1446).
/// Parameters without a gradient are skipped. Collective over `tp`: every rank passes the same
/// list of marked parameters.
void sum_sequence_parallel_gradients(const Parameters& parameters, const comm::Communicator& tp);

/// The L2 norm of the whole model's gradient, the same on every rank: each element counted
/// once, i.e. TP-split shards summed over TP, replicated parameters taken once, tied copies
/// skipped, summed over the stages. Call after finalize_gradients (DP replicas are then equal).
/// With `owned` (the distributed optimizer's DataParallelGradients::owned(), one range per
/// parameter) only those elements are counted and the sum also runs over the DP group, whose
/// ranks own disjoint parts. Collective over the TP and PP groups (and DP with `owned`).
double global_gradient_norm(const Parameters& parameters, const comm::ParallelTopology& topology,
                            const std::vector<ElementRange>* owned = nullptr);

/// torch.nn.utils.clip_grad_norm_: multiplies every gradient by min(1, max_norm / (norm + 1e-6)),
/// where `norm` is global_gradient_norm. Does nothing when max_norm <= 0 or the factor is 1. With
/// `owned` (one range per parameter, as for global_gradient_norm) only those elements are scaled:
/// the distributed optimizer updates its shard only, so the rest of a gradient is never read.
void clip_gradients(const Parameters& parameters, double norm, double max_norm,
                    const std::vector<ElementRange>* owned = nullptr);

}  // namespace mpitron::nn
