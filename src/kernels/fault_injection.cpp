#include "kernels/fault_injection.h"

#include <array>
#include <stdexcept>
#include <utility>

namespace mpitron::kernels {

namespace {
Fault active = Fault::none;

constexpr std::array<std::pair<const char*, Fault>, 38> kNames{{
    {"none", Fault::none},
    {"copy-to-tp-no-all-reduce", Fault::copy_to_tp_no_all_reduce},
    {"row-bias-every-rank", Fault::row_bias_every_rank},
    {"dp-sum-not-average", Fault::dp_sum_not_average},
    {"distributed-optimizer-wrong-shard", Fault::distributed_optimizer_wrong_shard},
    {"distributed-optimizer-no-all-gather", Fault::distributed_optimizer_no_all_gather},
    {"pp-gradient-not-sent", Fault::pp_gradient_not_sent},
    {"pp-chunk-wrong-stage", Fault::pp_chunk_wrong_stage},
    {"tp-input-grad-off-5-percent", Fault::tp_input_grad_off_5_percent},
    {"micro-batch-loss-weight-1", Fault::micro_batch_loss_weight_1},
    {"all-gather-rank-order-reversed", Fault::all_gather_rank_order_reversed},
    {"chunk-tail-dropped", Fault::chunk_tail_dropped},
    {"gelu-grad-no-x-phi", Fault::gelu_grad_no_x_phi},
    {"gelu-f64-grad-no-x-phi", Fault::gelu_f64_grad_no_x_phi},
    {"ring-all-reduce-overwrites", Fault::ring_all_reduce_overwrites},
    {"ring-all-gather-wrong-block", Fault::ring_all_gather_wrong_block},
    {"softmax-backward-no-row-dot", Fault::softmax_backward_no_row_dot},
    {"attention-scale-head-dim", Fault::attention_scale_head_dim},
    {"non-leaf-grad-overwritten", Fault::non_leaf_grad_overwritten},
    {"embedding-group-not-reduced", Fault::embedding_group_not_reduced},
    {"norm-counts-replicas-per-rank", Fault::norm_counts_replicas_per_rank},
    {"vocab-ce-local-max", Fault::vocab_ce_local_max},
    {"replica-drift", Fault::replica_drift},
    {"save-pauses-before-finish", Fault::save_pauses_before_finish},
    {"layer-norm-dx-no-mean", Fault::layer_norm_dx_no_mean},
    {"causal-mask-one-late", Fault::causal_mask_one_late},
    {"flash-attention-no-rescale", Fault::flash_attention_no_rescale},
    {"sp-layer-norm-grad-not-summed", Fault::sequence_parallel_layer_norm_grad_not_summed},
    {"rms-norm-eps-outside-root", Fault::rms_norm_eps_outside_root},
    {"rotary-adjacent-pairs", Fault::rotary_adjacent_pairs},
    {"swiglu-grad-no-silu-term", Fault::swiglu_grad_no_silu_term},
    {"bf16-round-truncates", Fault::bf16_round_truncates},
    {"bf16-gemm-overwrites", Fault::bf16_gemm_overwrites},
    {"bf16-main-grad-in-bf16", Fault::bf16_main_grad_in_bf16},
    {"cp-zigzag-chunks-swapped", Fault::cp_zigzag_chunks_swapped},
    {"ring-attention-no-lse-correction", Fault::ring_attention_no_lse_correction},
    {"ring-attention-dkv-not-returned", Fault::ring_attention_dkv_not_returned},
    {"cp-loss-local-mean", Fault::cp_loss_local_mean},
}};
std::string fault_names() {
  std::string names;
  for (std::size_t i = 1; i < kNames.size(); ++i)
    names += (i > 1 ? ", " : "") + std::string(kNames[i].first);
  return names;
}

}  // namespace

Fault parse_fault(const std::string& name) {
  for (const auto& [spelling, fault] : kNames) {
    if (name == spelling) return fault;
  }
  throw std::invalid_argument("unknown fault '" + name + "' (known: " + fault_names() + ")");
}

void inject_fault(Fault fault) {
  active = fault;
}

bool fault_active(Fault fault) {
  return active == fault;
}

}  // namespace mpitron::kernels
