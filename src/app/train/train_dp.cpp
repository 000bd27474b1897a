#include "app/train/train_dp.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string_view>

#include "app/common/help.h"
#include "app/common/options.h"
#include "app/common/progress.h"
#include "comm/agreement.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "kernels/device.h"
#include "nn/data/csv_dataset.h"
#include "nn/train/regressor_trainer.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

// A replica whose parameters differ from dp rank 0's by more than this has diverged: the
// replicas apply bit-identical updates (same averaged gradient, same SGD arithmetic), so any
// difference at all is a bug; 1e-6 only leaves room for a rank-dependent rounding someday.
constexpr double kReplicaTolerance = 1e-6;

}  // namespace

CLI::App& add_train_dp_command(CLI::App& app, TrainDpOptions& options) {
  CLI::App& command = *app.add_subcommand(
      "train-dp", "Data-parallel training of a small regressor (distributed sampler, SGD, MSE)");
  add_common_options(command, options.common);
  add_size_option(command, "--samples", options.samples, "Synthetic dataset size");
  add_size_option(command, "--features", options.features, "Input features per sample");
  add_size_option(command, "--targets", options.targets, "Targets per sample");
  add_size_option(command, "--hidden", options.hidden,
                  "Hidden width of an MLP (0: a linear model)");
  command.add_option("--data", options.data,
                     "CSV file, one sample per line: features then targets (default: synthetic "
                     "data from --seed)");
  command
      .add_option("--header", options.header,
                  "Is the first row of --data a header? auto: when none of its fields is a number "
                  "(a row of numbers is a sample, with a warning); yes; no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  command.add_option("--lr", options.lr, "SGD learning rate")->capture_default_str();
  command.add_option("--momentum", options.momentum, "SGD momentum")->capture_default_str();
  add_size_option(command, "--epochs", options.epochs, "Epochs");
  add_size_option(command, "--batch-size", options.batch_size, "Samples per rank per step");
  add_switch(command, "--drop-last", options.drop_last,
             "Drop the tail that does not divide over the ranks (default: pad it)");
  add_switch(command, "--no-check-replicas", options.skip_replica_check,
             "Skip the check after every epoch that every replica equals dp rank 0");
  add_progress_option(command, options.progress, "lines");
  command.add_option("--inject-fault", options.fault, "Test only: break one parallel rule")
      ->group("");
  add_example(command, "mpirun -np 4 mpitron train-dp --dp 4 --epochs 5");
  return command;
}

namespace {

void check_options(const TrainDpOptions& o) {
  const std::pair<const char*, std::int64_t> positive[] = {{"features", o.features},
                                                           {"targets", o.targets},
                                                           {"epochs", o.epochs},
                                                           {"batch-size", o.batch_size},
                                                           {"samples", o.samples}};
  for (const auto& [name, value] : positive) {
    if (value < 1) throw comm::ConfigError(fmt::format("--{} must be >= 1, got {}", name, value));
  }
  if (o.hidden < 0) throw comm::ConfigError(fmt::format("--hidden must be >= 0, got {}", o.hidden));
  if (!(o.lr > 0.0) || !std::isfinite(o.lr)) {
    throw comm::ConfigError(fmt::format("--lr must be a finite positive number, got {}", o.lr));
  }
  if (!(o.momentum >= 0.0 && o.momentum < 1.0)) {
    throw comm::ConfigError(fmt::format("--momentum must be in [0, 1), got {}", o.momentum));
  }
}

// The bytes of `values` as text for hashing.
std::string_view bytes_of(const std::vector<double>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double)};
}

// Every rank loads the data; a failure on any rank becomes the same ConfigError everywhere, and
// so does data that differs between ranks (e.g. different --data files on different nodes,
// which would give the ranks different step counts). Rank 0 warns when --header auto took a
// row of numbers for a sample.
nn::Dataset load_dataset(const TrainDpOptions& o, const comm::Communicator& world,
                         spdlog::logger& log) {
  std::optional<nn::CsvDataset> read;
  std::string error;
  try {
    read = o.data.empty() ? nn::CsvDataset{nn::make_synthetic_dataset(o.samples, o.features,
                                                                      o.targets, o.common.seed)}
                          : nn::read_csv_dataset(o.data, o.features, o.targets,
                                                 nn::parse_csv_header(o.header));
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (comm::all_reduce_scalar(world, read ? 1.0 : 0.0, comm::ReduceOp::min) != 1.0) {
    throw comm::ConfigError(read ? "the data could not be loaded on another rank" : error);
  }
  const nn::Dataset& data = read->data;
  comm::check_same_configuration(
      world,
      fmt::format("data: {} samples, FNV-1a {:016x} {:016x}", data.samples,
                  comm::fnv1a_64(bytes_of(data.inputs)), comm::fnv1a_64(bytes_of(data.outputs))));
  if (read->numeric_first_row_taken_as_data && world.rank() == 0) {
    log.warn(
        "warning: {}: the first row is all numbers and was taken as a sample (--header auto); "
        "pass --header yes if it is a header such as 0,1,2, or --header no to silence this",
        o.data);
  }
  return data;
}

// What each rank really reads per epoch, e.g. "each rank reads 5 samples per epoch (1 repeated
// to even out the ranks) in 3 steps of 2 samples, the last of 1".
std::string per_rank_work(const nn::RegressorTrainer& trainer, std::int64_t samples, int dp,
                          const TrainDpOptions& o) {
  const std::int64_t per_rank = trainer.samples_per_replica();
  const std::int64_t steps = trainer.steps_per_epoch();
  const std::int64_t all = per_rank * dp;
  std::string text = fmt::format("each rank reads {} per epoch", nn::counted(per_rank, "sample"));
  if (all > samples) text += fmt::format(" ({} repeated to even out the ranks)", all - samples);
  if (all < samples) text += fmt::format(" ({} dropped by --drop-last)", samples - all);
  text += fmt::format(" in {} of {}", nn::counted(steps, "step"),
                      nn::counted(std::min(o.batch_size, per_rank), "sample"));
  if (steps > 1 && per_rank % o.batch_size != 0) {
    text += fmt::format(", the last of {}", per_rank % o.batch_size);
  }
  return text;
}

std::string describe(const TrainDpOptions& o, int dp, kernels::Device device) {
  return fmt::format(
      "mpitron {} train-dp dp={} device={} samples={} features={} targets={} hidden={} data={} "
      "header={} lr={} momentum={} epochs={} batch_size={} drop_last={} seed={} fault={}",
      MPITRON_VERSION, dp, kernels::to_string(device), o.samples, o.features, o.targets, o.hidden,
      o.data, o.header, o.lr, o.momentum, o.epochs, o.batch_size, o.drop_last, o.common.seed,
      o.fault);
}

nlohmann::json parameters_json(const nn::Parameters& parameters) {
  nlohmann::json out = nlohmann::json::object();
  for (const nn::Parameter& p : parameters)
    out[p.name] = p.tensor.to_vector();
  return out;
}

}  // namespace

int run_train_dp(const TrainDpOptions& options, comm::Communicator world) {
  int dp = 1;
  kernels::Device device{};
  std::shared_ptr<spdlog::logger> log;
  comm::agree_on_configuration(world, [&] {
    if (options.common.tp.value_or(1) != 1 || options.common.pp.value_or(1) != 1) {
      throw comm::ConfigError("train-dp is data-parallel only: --tp and --pp must be 1");
    }
    CommonOptions sizes_only = options.common;
    sizes_only.tp = 1;
    sizes_only.pp = 1;
    sizes_only.dp = options.common.dp.value_or(world.size());
    dp = resolve_parallel_sizes(sizes_only, world.size()).dp;
    check_options(options);
    inject_fault(options.fault);
    device = resolve_device(options.common.device);
    log = prepare_run(options.common, world);
    return describe(options, dp, device);
  });
  const comm::ParallelTopology topology(world, 1, 1, dp);
  const nn::Dataset data = load_dataset(options, world, *log);
  if (options.drop_last && data.samples < dp) {
    throw comm::ConfigError(fmt::format("--drop-last with {} leaves nothing for {}",
                                        nn::counted(data.samples, "sample"),
                                        nn::counted(dp, "rank")));
  }

  nn::TrainerOptions trainer_options;
  trainer_options.batch_size = options.batch_size;
  trainer_options.lr = options.lr;
  trainer_options.momentum = options.momentum;
  trainer_options.shuffle_seed = options.common.seed;
  trainer_options.drop_last = options.drop_last;
  trainer_options.device = device;
  nn::RegressorTrainer trainer(
      nn::make_regressor_weights(data.features, options.hidden, data.targets,
                                 options.common.seed + 1000, trainer_options.dtype, device),
      data, topology.dp_comm(), trainer_options);
  log->info("train-dp: {}, {} x {} -> {}, {} model, device {}; {}", nn::counted(dp, "rank"),
            nn::counted(data.samples, "sample"), nn::counted(data.features, "feature"),
            nn::counted(data.targets, "target"),
            options.hidden > 0 ? fmt::format("MLP (hidden {})", options.hidden) : "linear",
            kernels::to_string(device), per_rank_work(trainer, data.samples, dp, options));

  const auto start = std::chrono::steady_clock::now();
  nlohmann::json epochs = nlohmann::json::array();
  double last_loss = 0.0;
  const std::int64_t steps = trainer.steps_per_epoch();
  const std::int64_t per_rank = trainer.samples_per_replica();
  ProgressLine progress("train-dp", options.epochs * steps, "samples/s",
                        parse_progress_mode(options.progress), world.rank() == 0);
  for (std::int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    const std::vector<double> losses =
        trainer.train_epoch(epoch, [&](std::int64_t step, double loss) {
          const std::int64_t read =
              epoch * per_rank + std::min((step + 1) * options.batch_size, per_rank);
          const double elapsed =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          progress.update(epoch * steps + step + 1, loss,
                          static_cast<double>(read * dp) / std::max(elapsed, 1e-9));
        });
    progress.suspend();
    const double mean =
        std::accumulate(losses.begin(), losses.end(), 0.0) / static_cast<double>(losses.size());
    const std::vector<double> by_rank = comm::all_gather_scalar(world, mean);
    for (std::size_t r = 0; r < by_rank.size(); ++r) {
      log->info("rank {} epoch {} loss {:.6f}", r, epoch + 1, by_rank[r]);
    }
    last_loss =
        std::accumulate(by_rank.begin(), by_rank.end(), 0.0) / static_cast<double>(by_rank.size());
    epochs.push_back({{"epoch", epoch + 1}, {"loss_by_rank", by_rank}});
    if (!std::isfinite(last_loss)) {  // every rank sees the same gathered losses
      log->error(
          "error: training diverged in epoch {}: the loss is {} (lower --lr, or check the data)",
          epoch + 1, last_loss);
      return 1;
    }
    if (options.skip_replica_check) continue;
    const nn::ReplicaDifference diff =
        nn::replica_difference(trainer.model().parameters(), topology.dp_comm());
    if (diff.max_abs > kReplicaTolerance) {
      log->error(
          "error: replicas diverged after epoch {}: max |parameter - dp rank 0's| = {:.3e} "
          "> {:g}{}",
          epoch + 1, diff.max_abs, kReplicaTolerance,
          diff.worst.empty() ? "" : " (worst here: " + diff.worst + ")");
      return 1;
    }
    log->debug("epoch {}: replicas in sync (max difference {:.3e})", epoch + 1, diff.max_abs);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log->info("train-dp done: {} x {} on {}, final loss {:.6f} (mean over ranks), {:.3f} s{}",
            nn::counted(options.epochs, "epoch"), nn::counted(trainer.steps_per_epoch(), "step"),
            nn::counted(dp, "rank"), last_loss, seconds,
            options.skip_replica_check ? "" : ", replicas in sync");
  if (!options.common.json.empty() && world.rank() == 0) {
    write_json(options.common.json,
               nlohmann::json{{"config", describe(options, dp, device)},
                              {"epochs", epochs},
                              {"final_loss", last_loss},
                              {"seconds", seconds},
                              {"parameters", parameters_json(trainer.model().parameters())}});
  }
  return 0;
}

}  // namespace mpitron::app
