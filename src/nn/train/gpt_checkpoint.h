// Checkpoints of a GPT training run on top of checkpoint.h: who writes what when saving, and
// how a run of any topology rebuilds its parameters and AdamW moments from a checkpoint of any
// other (full tensors from the saved shards and their recorded layouts, then this rank's slice).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/topology.h"
#include "nn/train/gpt_trainer.h"

namespace mpitron::nn {

/// Thrown alike on every rank by save_gpt_checkpoint when a step's state is not finite.
class NonFiniteStateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Saves `trainer`'s state after step `step` into DIR/step_<step>/: dp rank 0 of every (tp, pp)
/// writes its shard (parameters, except tied copies, and, for AdamW, "<name>.exp_avg" and
/// "<name>.exp_avg_sq"); after a barrier, world rank 0 writes meta.json (`meta` plus "topology",
/// "step", "config" and "optimizer_steps"), DONE and DIR/latest; a last barrier. Collective over
/// the world. Only finite steps are saved: before anything is written every rank checks its
/// shard, and when any tensor of any rank holds a NaN or an infinity nothing is written and
/// NonFiniteStateError is thrown on every rank ("step 3 is not saved: 36 of its 108 tensors
/// (parameters and optimizer moments) hold NaN or infinite values (lower --lr)"). Throws
/// std::runtime_error naming the path on I/O failure.
void save_gpt_checkpoint(const std::filesystem::path& dir, std::int64_t step, GptTrainer& trainer,
                         const comm::ParallelTopology& topology, nlohmann::json meta);

/// A loaded checkpoint: the full (unsharded) tensors of every parameter (and moment) and its
/// meta.json.
struct GptCheckpoint {
  std::int64_t step = 0;
  nlohmann::json meta;
  GptConfig config;
  std::map<std::string, Tensor> full;
  /// The newer complete steps of the folder that did not load, each as the CheckpointError
  /// message saying why ("ckpt/step_20: tensor wte holds inf at element 3"); newest first.
  std::vector<std::string> skipped;
};

/// Reads the complete step `path` names: a step folder DIR/step_<k> itself, or of a checkpoint
/// folder its newest complete step that loads (complete_steps' order; the newer ones that do not
/// load are listed in `skipped`). Reads its meta.json (whose "config" gives the model sizes) and
/// the full tensors of every parameter, and of the AdamW moments when `with_moments`. No
/// communication: every rank reads the files. Throws CheckpointError (one line naming the file
/// and what differs) when there is no complete step, or when no complete step loads (a file is
/// damaged or missing, a tensor holds NaN or inf or does not fit the recorded model sizes): the
/// newest step's reason.
GptCheckpoint load_gpt_checkpoint(const std::filesystem::path& path, bool with_moments);

/// The message of the first model choice (family, size, kv heads, ffn size, tied embeddings,
/// GELU form, norm eps, RoPE theta, rope_scaling) in which `checkpoint` differs from `config`
/// ("the checkpoint has hidden 256, this run 128"), or nothing. The padding of the
/// vocabulary may differ: checkpoint_init and restore_optimizer refit it.
std::optional<std::string> checkpoint_config_error(const GptCheckpoint& checkpoint,
                                                   const GptConfig& config);

/// A MasterInit that returns the checkpoint's full parameter tensors, in `dtype` on `device`;
/// the token embedding refitted to the spec's rows (its vocabulary rows, then zero padding).
MasterInit checkpoint_init(const GptCheckpoint& checkpoint, DType dtype, Device device);

/// Sets `trainer`'s AdamW moments (this rank's slices of the saved full moments) and step count
/// from `checkpoint`. Throws std::invalid_argument when the trainer's optimizer is not AdamW or
/// the checkpoint holds no moments.
void restore_optimizer(GptTrainer& trainer, const GptCheckpoint& checkpoint,
                       const comm::ParallelTopology& topology);

/// The config as JSON ({"vocab", "padded_vocab", "block_size", "layers", "hidden", "heads",
/// "gelu"}, and for llama "arch", "kv_heads", "ffn_hidden", "norm_eps", "rope_theta",
/// "tied_embeddings" and, when scaled, "rope_scaling" {"rope_type": "llama3", "factor",
/// "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}, Hugging Face's
/// names) and back; JSON without "padded_vocab", "gelu" or "arch" (older
/// checkpoints) reads as no padding, erf and gpt2. Back throws nlohmann::json::exception for a
/// missing size and std::invalid_argument for an unknown GELU form.
nlohmann::json to_json(const GptConfig& config);
GptConfig gpt_config_from_json(const nlohmann::json& json);

}  // namespace mpitron::nn
