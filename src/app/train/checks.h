// The checks of `mpitron train`'s flags before anything is loaded or allocated: against each
// other and the model's sizes, this node's memory and the file system.
#pragma once

#include <optional>
#include <string>

#include "app/common/options.h"
#include "app/train/settings.h"
#include "nn/models/gpt_config.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::app {

/// Throws comm::ConfigError naming the flag for a model flag of the other family given on the
/// command line (whatever its value): a llama flag (--kv-heads, --ffn-hidden, --rope-theta,
/// --untie-embeddings) with `arch` gpt2 ("... add --arch llama", or "--model gpt2 is a gpt2
/// model"), --gelu with llama, or --init-from a GPT-2 file with llama; or for --arch given
/// against a --model preset's family ("--model smollm-135m is a llama model, not --arch gpt2").
void check_family_flags(const TrainOptions& o, nn::Arch arch);

/// Checks the settings' own rules (check_train_settings), then the flags against `config` (the
/// model, --init-from's sizes applied) and the degrees `sizes`: the model's size rules
/// (nn::gpt_size_error), --global-batch divisible by --micro-batch x dp, --virtual-stages (at most
/// the layers, pp >= 2, micro-batches a multiple of pp), a known --model, --seq divisible by tp
/// under --sequence-parallel and at most the block size, --lr, --min-lr, --norm-eps and
/// --rope-theta finite in float32 ("--norm-eps 1e+39 is not finite in float32 (at most
/// 3.40282e+38)") and min-lr <= lr, a known --exit-signal, --stop-after <= --steps. Throws
/// comm::ConfigError naming the flags.
void check_train_flags(const TrainOptions& options, const nn::GptConfig& config,
                       const ParallelSizes& sizes);

/// Rejects a step that cannot fit in this node's memory before anything is allocated:
/// nn::gpt_step_memory_bytes with the first stage's micro-batches in flight (every one under
/// AFAB, at most pp under 1F1B, about pp (1 + 1 / v) under interleaved 1F1B), times the
/// `ranks_on_node`, against the node's physical memory. Throws comm::ConfigError ("this run
/// needs about 3.1 GiB per rank ...") with the flags that lower it.
void check_memory(const TrainOptions& options, const nn::GptConfig& config,
                  const ParallelSizes& sizes, const nn::GptTrainOptions& train, int ranks_on_node);

/// The folder --save writes (created here) and the file --metrics appends to must be writable
/// before the first step, not found out after the last. Throws comm::ConfigError naming the flag
/// and the reason.
void check_outputs(const TrainOptions& options);

/// Without --load, the steps another run left in --save: nothing when the folder holds no
/// complete step or --load is given (a resume, or the first start of a requeued job); else
/// "run <id>'s steps up to step <k>" ("an earlier run" where its meta.json names no run) when
/// --overwrite-checkpoints asks to replace them. Throws comm::ConfigError "--save ck holds run
/// <id>'s steps up to step <k>: resume that run with --load ck, or give
/// --overwrite-checkpoints to replace them" otherwise.
std::optional<std::string> steps_to_overwrite(const TrainOptions& options);

/// --load and --save naming one folder that holds no complete step yet: the first start of a
/// job that a scheduler may requeue (one command line for the first start and every restart, as
/// in Megatron-LM), which starts fresh.
bool first_start_of_requeued_run(const TrainOptions& options);

}  // namespace mpitron::app
