// `mpitron train-dp`: data-parallel training of a small regressor with a distributed sampler,
// SGD and per-epoch loss lines, like the reference program's DDP job.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "app/common/options.h"

namespace mpitron::app {

struct TrainDpOptions {
  CommonOptions common;
  std::int64_t samples = 1000;
  std::int64_t features = 10;
  std::int64_t targets = 1;
  std::int64_t hidden = 0;      ///< 0: Linear(features -> targets); else an MLP with this width
  std::string data;             ///< CSV file (features then targets per line); empty: synthetic
  std::string header = "auto";  ///< --data's first row: auto, yes or no (nn::CsvHeader)
  double lr = 0.01;
  double momentum = 0.0;
  std::int64_t epochs = 5;
  std::int64_t batch_size = 32;  ///< per rank
  bool drop_last = false;
  bool skip_replica_check = false;  ///< skip comparing every replica with dp rank 0 each epoch
  std::string progress = "auto";    ///< --progress: auto, in-place, lines or off
  std::string fault = "none";       ///< test only: an nn::Fault spelling (e.g. replica-drift)
};

/// Adds the `train-dp` subcommand and its flags to `app`.
CLI::App& add_train_dp_command(CLI::App& app, TrainDpOptions& options);

/// Trains on every rank of `world` (dp = the world size; --tp and --pp must be 1). Prints
/// "rank R epoch E loss L" for every rank and epoch (L: the mean of that rank's step losses in
/// the epoch) and a summary. Returns 0, or 1 when the replica check finds a parameter differing
/// from dp rank 0's by more than 1e-6. Throws comm::ConfigError, before any training, for bad
/// sizes or hyper-parameters or an unreadable --data file (agreed over all ranks).
int run_train_dp(const TrainDpOptions& options, comm::Communicator world);

}  // namespace mpitron::app
