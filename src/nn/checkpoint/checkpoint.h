// Checkpoint directories: per-(tp, pp)-shard safetensors files written independently by their
// ranks, a meta.json, and markers that make a step visible only once it is complete. Loading
// rebuilds full (unsharded) tensors from the saved shards and their recorded TP layouts, so a run
// of any topology can load a checkpoint of any other. No MPI here: the caller decides who writes
// and places the barriers.
//
// Layout:
//   DIR/step_<k>/shard_tp<t>_pp<p>.safetensors   one per (tp rank t, pp rank p) of the saving run:
//                                                that shard's tensors (parameters and optimizer
//                                                state "<name>.exp_avg", "<name>.exp_avg_sq"), and
//                                                in "__metadata__": "split_dim:<name>" ->
//                                                "replicated" | "<dim>", "tp_rank", "pp_rank",
//                                                "step"
//   DIR/step_<k>/meta.json                       the caller's JSON object; "topology" {"tp", "pp",
//                                                "dp"} is required
//   DIR/step_<k>/DONE                            written last: the step is complete
//   DIR/latest                                   "step_<k>\n": the most recently finished step
// Every file is written atomically (AtomicFile). Saving step k touches only DIR/step_<k>/ and
// DIR/latest, so a crash while saving never damages an earlier step.
//
// Save protocol (one checkpoint):
//   1. every writer rank (dp rank 0 of each (tp, pp)): write_shard(dir, k, tp_rank, pp_rank, ...)
//   2. barrier
//   3. one rank: finish_step(dir, k, meta)
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/checkpoint/safetensors.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// Name suffixes of the AdamW moments of parameter "<name>" (PyTorch's state names).
inline constexpr const char* kExpAvgSuffix = ".exp_avg";
inline constexpr const char* kExpAvgSqSuffix = ".exp_avg_sq";

/// One tensor of a rank's shard and its TP layout: kReplicated or the dim along which the full
/// tensor was cut into tp equal slices (as Parameter::split_dim; a moment shares its parameter's).
struct ShardTensor {
  std::string name;
  Tensor tensor;
  int split_dim = kReplicated;
};

/// A full tensor a loader wants: its name, TP layout, full (unsharded) shape and dtype.
struct TensorRecord {
  std::string name;
  int split_dim = kReplicated;
  Shape full_shape;
  DType dtype = DType::f32;
};

/// The record of a parameter sharded over `tp` ranks: the full shape is the shard's with
/// split_dim multiplied by tp. Throws std::invalid_argument when tp < 1 or split_dim is neither
/// kReplicated nor a dim of the tensor.
TensorRecord full_record(const Parameter& parameter, int tp);

/// DIR/step_<k>.
std::filesystem::path step_directory(const std::filesystem::path& dir, std::int64_t step);

/// DIR/step_<k>/shard_tp<t>_pp<p>.safetensors.
std::filesystem::path shard_path(const std::filesystem::path& dir, std::int64_t step, int tp_rank,
                                 int pp_rank);

/// Opens the shard file of (tp_rank, pp_rank) of step `step` and checks that its metadata names
/// that shard and step. Throws CheckpointError "<path>: ..." when it is missing ("missing shard
/// file"), damaged (see SafetensorsReader) or another shard's.
SafetensorsReader open_shard(const std::filesystem::path& dir, std::int64_t step, int tp_rank,
                             int pp_rank);

/// The TP layout recorded for tensor `name` of an open shard file: kReplicated or a dim. Throws
/// CheckpointError "<path>: ..." when the file records none for it or an unreadable one.
int saved_split_dim(const SafetensorsReader& shard, const std::string& name);

/// Writes the shard of (tp_rank, pp_rank) for step `step` (creating DIR/step_<k>/ as needed),
/// replacing any earlier file of that shard. First removes the step's DONE marker (durably), so a
/// step being saved again is never loaded half-rewritten. Throws std::invalid_argument for a
/// negative step or rank, a split_dim that is neither kReplicated nor a dim of its tensor, or a
/// bad tensor list (see write_safetensors); std::runtime_error naming the path on I/O failure.
void write_shard(const std::filesystem::path& dir, std::int64_t step, int tp_rank, int pp_rank,
                 const std::vector<ShardTensor>& tensors);

/// Completes step `step` after every shard has been written: checks that each shard file of
/// meta["topology"] exists and has a valid header, removes files left by earlier, interrupted
/// saves (other shard files in this step's directory; temporary files in DIR and in every
/// step_<k>/), then writes meta.json, DONE and DIR/latest, in that order. Throws
/// std::invalid_argument when meta is not an object with "topology" {"tp": >= 1, "pp": >= 1, "dp":
/// >= 1}; CheckpointError "<path>: ..." for a missing or damaged shard file; std::runtime_error on
/// I/O failure.
void finish_step(const std::filesystem::path& dir, std::int64_t step, const nlohmann::json& meta);

/// Removes the temporary files that interrupted saves left in DIR and in every DIR/step_<k>/.
/// Only for the folder's owner (nn::FolderLock), as no other writer may be active there.
/// Throws std::filesystem::filesystem_error when DIR cannot be read.
void remove_interrupted_save_leftovers(const std::filesystem::path& dir);

/// Removes every DIR/step_<k>/ folder and DIR/latest: the steps of another run, which a new run
/// replaces. Only for the folder's owner (nn::FolderLock). Throws
/// std::filesystem::filesystem_error when DIR cannot be read or a step cannot be removed.
void remove_steps(const std::filesystem::path& dir);

/// True when DIR/step_<k>/DONE exists.
bool step_complete(const std::filesystem::path& dir, std::int64_t step);

/// The step to resume from: the one DIR/latest names when that step is complete; when it names
/// a step without DONE (one being saved again), the highest complete step_<k> below it (those
/// above belong to an abandoned run, complete_steps); when latest is missing or unreadable, the
/// highest complete step_<k>; nullopt when there is none (or DIR does not exist).
std::optional<std::int64_t> latest_step(const std::filesystem::path& dir);

/// Why DIR/latest was passed over, one line: it names a step that is not complete
/// ("ckpt/step_99, which ckpt/latest names, is not complete (no DONE file: being saved, or
/// removed)"), or it holds no step's name (`ckpt/latest holds "junk", not a step's name
/// (step_<k>)`, its first 40 characters escaped); nullopt when latest is missing or names a
/// complete step.
std::optional<std::string> latest_passed_over(const std::filesystem::path& dir);

/// The complete steps of DIR to try, newest first: latest_step, then the complete step_<k> below
/// it from the highest k down; empty when there is none (or DIR does not exist). Steps above
/// latest_step are left out: a run resumed from an earlier step leaves the abandoned run's later
/// steps behind, and they are not this history's.
std::vector<std::int64_t> complete_steps(const std::filesystem::path& dir);

/// A checkpoint folder and one of its steps.
struct StepLocation {
  std::filesystem::path dir;  ///< the folder holding step_<k>/ and latest
  std::int64_t step = 0;
};

/// The complete step `path` names: a checkpoint folder DIR names its latest_step, and a step
/// folder DIR/step_<k> (a trailing separator allowed) names itself, so an older step can be
/// loaded; nullopt when that step is incomplete or there is none.
std::optional<StepLocation> locate_step(const std::filesystem::path& path);

/// Why DIR has no complete step to resume from (when latest_step gives nullopt), one line:
/// "<dir>: no such checkpoint folder", "<dir>: not a folder", "<dir>: no checkpoint step (no
/// step_<k> folder)" or "<dir>/step_<k>: incomplete checkpoint (no DONE marker), and no other
/// step is complete" for the newest step folder; for a step folder DIR/step_<k> itself,
/// "<path>: incomplete checkpoint (no DONE marker)".
std::string no_complete_step_message(const std::filesystem::path& dir);

/// The meta.json of a complete step. Throws CheckpointError "<path>: ..." when the step has no
/// DONE marker, meta.json is missing or not JSON, or its "topology" lacks positive "tp" / "pp".
nlohmann::json read_meta(const std::filesystem::path& dir, std::int64_t step);

/// Rebuilds the full tensors `wanted` from the shards of complete step `step`, whose saving
/// topology comes from meta.json. A name lives in the files of one pp stage, or of several with
/// identical values (tied copies). A split tensor is the concatenation of its tp slices along
/// split_dim (slice t from tp rank t); a replicated one is tp rank 0's copy. Returns CPU leaves
/// of the wanted full shapes and dtypes, keyed by name; the caller slices its own shard with
/// nn::shard. Each shard file is opened once and only the wanted tensors' bytes are read.
/// Throws CheckpointError, one line naming the file (or the step directory) and what differs:
/// incomplete step, missing shard file, damaged file (see SafetensorsReader), missing name, a
/// shape that does not match the wanted full shape (e.g. other model sizes), another dtype, a
/// layout saved along another split dim, tied copies that differ. Throws std::invalid_argument
/// for a record whose split_dim is not a dim of its full shape.
std::map<std::string, Tensor> load_full_tensors(const std::filesystem::path& dir, std::int64_t step,
                                                const std::vector<TensorRecord>& wanted);

}  // namespace mpitron::nn
