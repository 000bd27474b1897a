// `mpitron train`: a GPT-2-style byte-level language model trained with tensor, pipeline and
// data parallelism (1F1B or all-forward-all-backward), AdamW or SGD, warmup + cosine learning
// rate, global-norm clipping, and periodic validation loss.
#pragma once

#include "app/train/settings.h"
#include "comm/communicator.h"

namespace mpitron::app {

/// Trains on every rank of `world`. Rank 0 prints the topology and the parameter count per rank
/// first, then one line per step (loss, learning rate, gradient norm, ms, tokens/s) and the
/// validation loss at each eval interval. Returns 0, or 1 when the loss stops being finite
/// (naming the step). Throws comm::ConfigError (agreed over all ranks, before any training)
/// for sizes that do not divide, non-finite or non-positive rates or clip, unknown schedule /
/// optimizer / dtype names, unreadable, empty or too short data, or a --load checkpoint that is
/// missing, damaged or of other model sizes. With --load the run continues at the step after
/// the checkpoint's, on any topology (parameters and AdamW moments are resharded), with the
/// checkpoint's --seed; with --save it writes DIR/step_<k>/ every --save-interval steps and
/// after the last. --stop-after K ends the run after step K (saving it with --save) while the
/// learning-rate schedule stays that of --steps, so a later --load continues as if never stopped.
int run_train(const TrainOptions& options, comm::Communicator world);

}  // namespace mpitron::app
