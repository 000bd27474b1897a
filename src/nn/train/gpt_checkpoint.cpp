#include "nn/train/gpt_checkpoint.h"

#include <fmt/format.h>

#include <cmath>

#include <algorithm>
#include <numeric>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "comm/agreement.h"
#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/checkpoint/checkpoint.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

AdamW* adamw_of(GptTrainer& trainer) {
  return dynamic_cast<AdamW*>(&trainer.optimizer());
}

// What this rank's shard of a checkpoint holds: the parameters' float32 weights (under --bf16
// the masters, GptTrainer::master_weights), except tied copies, and for AdamW "<name>.exp_avg"
// and "<name>.exp_avg_sq", whole (the distributed optimizer's shards are all-gathered over DP
// first, so the files do not depend on it). Collective over DP.
std::vector<ShardTensor> shard_tensors(GptTrainer& trainer) {
  std::vector<ShardTensor> tensors;
  const std::vector<Tensor> weights = trainer.master_weights();
  AdamW* adamw = adamw_of(trainer);
  std::vector<Tensor> exp_avg, exp_avg_sq;
  if (adamw != nullptr) {
    exp_avg = trainer.gradients().all_gather_shards(adamw->exp_avg());
    exp_avg_sq = trainer.gradients().all_gather_shards(adamw->exp_avg_sq());
  }
  const Parameters& parameters = trainer.parameters();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& p = parameters[i];
    if (p.tied_copy) continue;
    tensors.push_back({p.name, weights[i], p.split_dim});
    if (adamw != nullptr) {
      tensors.push_back({p.name + kExpAvgSuffix, exp_avg[i], p.split_dim});
      tensors.push_back({p.name + kExpAvgSqSuffix, exp_avg_sq[i], p.split_dim});
    }
  }
  return tensors;
}

// The one rank of each (tp, pp) shard that writes it: dp rank 0 and cp rank 0 (the replicas and
// the context-parallel ranks hold the same parameters and gathered moments).
bool writes_shard(const comm::ParallelTopology& topology) {
  return topology.dp_rank() == 0 && topology.cp_rank() == 0;
}

// Throws NonFiniteStateError on every rank when a tensor of the step (`tensors` of every rank,
// each shard counted once: on its writer) holds a NaN or an infinity.
void require_finite(const std::vector<ShardTensor>& tensors, std::int64_t step,
                    const comm::ParallelTopology& topology) {
  double bad = 0.0, all = 0.0;
  if (writes_shard(topology)) {
    for (const ShardTensor& t : tensors)
      bad += all_finite(t.tensor) ? 0.0 : 1.0;
    all = static_cast<double>(tensors.size());
  }
  const std::vector<double> bad_by_rank = comm::all_gather_scalar(topology.world(), bad);
  const std::vector<double> all_by_rank = comm::all_gather_scalar(topology.world(), all);
  const double total_bad = std::accumulate(bad_by_rank.begin(), bad_by_rank.end(), 0.0);
  if (total_bad == 0.0) return;
  throw NonFiniteStateError(fmt::format(
      "step {} is not saved: {} of its {} tensors (parameters and optimizer moments) hold NaN "
      "or infinite values (lower --lr)",
      step, total_bad, std::accumulate(all_by_rank.begin(), all_by_rank.end(), 0.0)));
}

}  // namespace

nlohmann::json to_json(const GptConfig& c) {
  nlohmann::json j = {{"vocab", c.vocab},           {"padded_vocab", c.vocab_rows()},
                      {"block_size", c.block_size}, {"layers", c.layers},
                      {"hidden", c.hidden},         {"heads", c.heads},
                      {"gelu", to_string(c.gelu)}};
  if (c.llama()) {
    j.update({{"arch", to_string(c.arch)},
              {"kv_heads", c.kv_head_count()},
              {"ffn_hidden", c.ffn_size()},
              {"norm_eps", c.norm_eps},
              {"rope_theta", c.rope_theta},
              {"tied_embeddings", c.tied_embeddings}});
    if (c.rope_scaling.active()) {
      const kernels::Llama3RopeScaling& s = c.rope_scaling;
      j["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", s.factor},
                           {"low_freq_factor", s.low_freq_factor},
                           {"high_freq_factor", s.high_freq_factor},
                           {"original_max_position_embeddings", s.original_max_positions}};
    }
  }
  return j;
}

GptConfig gpt_config_from_json(const nlohmann::json& j) {
  GptConfig config{j.at("vocab").get<std::int64_t>(), j.at("block_size").get<std::int64_t>(),
                   j.at("layers").get<std::int64_t>(), j.at("hidden").get<std::int64_t>(),
                   j.at("heads").get<std::int64_t>()};
  // Checkpoints from before the padded vocabulary and the GELU choice: no padding, erf.
  config.padded_vocab = j.value("padded_vocab", config.vocab);
  config.gelu = gelu_form_from_string(j.value("gelu", std::string("erf")));
  // GPT-2 checkpoints record no family.
  config.arch = arch_from_string(j.value("arch", std::string("gpt2")));
  if (config.llama()) {
    config.kv_heads = j.at("kv_heads").get<std::int64_t>();
    config.ffn_hidden = j.at("ffn_hidden").get<std::int64_t>();
    config.norm_eps = j.at("norm_eps").get<double>();
    config.rope_theta = j.at("rope_theta").get<double>();
    config.tied_embeddings = j.at("tied_embeddings").get<bool>();
    if (j.contains("rope_scaling")) {
      const nlohmann::json& s = j.at("rope_scaling");
      config.rope_scaling = {s.at("factor").get<double>(), s.at("low_freq_factor").get<double>(),
                             s.at("high_freq_factor").get<double>(),
                             s.at("original_max_position_embeddings").get<double>()};
    }
  }
  return config;
}

void save_gpt_checkpoint(const std::filesystem::path& dir, std::int64_t step, GptTrainer& trainer,
                         const comm::ParallelTopology& topology, nlohmann::json meta) {
  const std::vector<ShardTensor> tensors = shard_tensors(trainer);
  require_finite(tensors, step, topology);
  if (writes_shard(topology))
    write_shard(dir, step, topology.tp_rank(), topology.pp_rank(), tensors);
  if (fault_active(Fault::save_pauses_before_finish)) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  comm::barrier(topology.world());
  if (topology.world().rank() == 0) {
    meta["topology"] = {
        {"tp", topology.tp()}, {"pp", topology.pp()}, {"dp", topology.dp()}, {"cp", topology.cp()}};
    meta["step"] = step;
    meta["config"] = to_json(trainer.stage().config());
    meta["optimizer_steps"] = adamw_of(trainer) ? adamw_of(trainer)->steps() : step;
    meta["moments"] = adamw_of(trainer) != nullptr;
    finish_step(dir, step, meta);
  }
  comm::barrier(topology.world());
}

namespace {

// Step `step` of checkpoint folder `dir` (see load_gpt_checkpoint).
GptCheckpoint load_step(const std::filesystem::path& dir, std::int64_t step, bool with_moments) {
  GptCheckpoint checkpoint;
  checkpoint.step = step;
  checkpoint.meta = read_meta(dir, step);
  try {
    checkpoint.config = gpt_config_from_json(checkpoint.meta.at("config"));
  } catch (const std::exception& e) {  // a missing entry, or a GELU form of another name
    throw CheckpointError(fmt::format("{}/meta.json: no model sizes: {}",
                                      step_directory(dir, step).string(), e.what()));
  }
  if (with_moments && !checkpoint.meta.value("moments", false)) {
    throw CheckpointError(fmt::format("{}/meta.json: the checkpoint holds no AdamW moments",
                                      step_directory(dir, step).string()));
  }
  std::vector<TensorRecord> wanted;
  for (const ParameterSpec& spec : gpt_parameter_specs(checkpoint.config)) {
    wanted.push_back({spec.name, spec.split_dim, spec.full_shape, DType::f32});
    if (!with_moments) continue;
    for (const char* suffix : {kExpAvgSuffix, kExpAvgSqSuffix}) {
      wanted.push_back({spec.name + suffix, spec.split_dim, spec.full_shape, DType::f32});
    }
  }
  // The dtype of the saved run: every tensor of one checkpoint shares it.
  if (checkpoint.meta.value("dtype", std::string("float32")) == "float64") {
    for (TensorRecord& record : wanted)
      record.dtype = DType::f64;
  }
  checkpoint.full = load_full_tensors(dir, step, wanted);
  // A damaged value loads as well as a good one; a NaN or infinity would train or evaluate to
  // NaN, so it is named here.
  for (const auto& [name, tensor] : checkpoint.full) {
    const std::vector<double> values = tensor.to_vector();
    const auto bad =
        std::find_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
    if (bad != values.end()) {
      throw CheckpointError(fmt::format("{}: tensor {} holds {} at element {}",
                                        step_directory(dir, step).string(), name, *bad,
                                        bad - values.begin()));
    }
  }
  return checkpoint;
}

}  // namespace

GptCheckpoint load_gpt_checkpoint(const std::filesystem::path& path, bool with_moments) {
  const std::optional<StepLocation> location = locate_step(path);
  if (!location) throw CheckpointError(no_complete_step_message(path));
  if (location->dir != path) return load_step(location->dir, location->step, with_moments);
  // A folder: its newest step that loads, the others named with why they did not.
  std::vector<std::string> skipped;
  for (const std::int64_t step : complete_steps(path)) {
    try {
      GptCheckpoint checkpoint = load_step(path, step, with_moments);
      if (auto why = latest_passed_over(path)) skipped.insert(skipped.begin(), std::move(*why));
      checkpoint.skipped = std::move(skipped);
      return checkpoint;
    } catch (const CheckpointError& e) {
      skipped.push_back(e.what());
    }
  }
  if (skipped.size() == 1) throw CheckpointError(skipped.front());
  throw CheckpointError(fmt::format("{} (and the {} older complete steps do not load either)",
                                    skipped.front(), skipped.size() - 1));
}

std::optional<std::string> checkpoint_config_error(const GptCheckpoint& checkpoint,
                                                   const GptConfig& config) {
  const GptConfig& saved = checkpoint.config;
  if (saved.arch != config.arch) {
    return fmt::format("the checkpoint holds a {} model, this run {}", to_string(saved.arch),
                       to_string(config.arch));
  }
  const std::pair<const char*, std::pair<std::int64_t, std::int64_t>> sizes[] = {
      {"vocab", {saved.vocab, config.vocab}},
      {"block size (seq)", {saved.block_size, config.block_size}},
      {"layers", {saved.layers, config.layers}},
      {"hidden", {saved.hidden, config.hidden}},
      {"heads", {saved.heads, config.heads}},
      {"kv heads", {saved.kv_head_count(), config.kv_head_count()}},
      {"ffn hidden", {saved.ffn_size(), config.ffn_size()}}};
  for (const auto& [name, values] : sizes) {
    if (values.first != values.second) {
      return fmt::format("the checkpoint has {} {}, this run {}", name, values.first,
                         values.second);
    }
  }
  if (saved.tied_embeddings != config.tied_embeddings) {
    return saved.tied_embeddings ? std::string(
                                       "the checkpoint has tied embeddings, this run untied "
                                       "(--untie-embeddings)")
                                 : std::string(
                                       "the checkpoint has untied embeddings, this run tied (add "
                                       "--untie-embeddings)");
  }
  if (saved.gelu != config.gelu) {
    return fmt::format("the checkpoint has GELU {}, this run {}", to_string(saved.gelu),
                       to_string(config.gelu));
  }
  if (saved.norm_eps != config.norm_eps || saved.rope_theta != config.rope_theta) {
    return fmt::format("the checkpoint has norm eps {} and rope theta {}, this run {} and {}",
                       saved.norm_eps, saved.rope_theta, config.norm_eps, config.rope_theta);
  }
  if (saved.rope_scaling != config.rope_scaling) {
    return fmt::format("the checkpoint has rope_scaling {}, this run {}",
                       to_json(saved).value("rope_scaling", nlohmann::json()).dump(),
                       to_json(config).value("rope_scaling", nlohmann::json()).dump());
  }
  return std::nullopt;
}

namespace {

// The saved full tensor `name` (a parameter or a moment) with the rows `rows` of this run: the
// token embedding and its moments are refitted when the padding differs (another tp).
Tensor refitted(const GptCheckpoint& checkpoint, const std::string& name, std::int64_t rows) {
  const Tensor& full = checkpoint.full.at(name);
  if (!name.starts_with("transformer.wte.weight") || full.size(0) == rows) return full;
  return fit_vocab_rows(full, checkpoint.config.vocab, rows);
}

}  // namespace

MasterInit checkpoint_init(const GptCheckpoint& checkpoint, DType dtype, Device device) {
  return [&checkpoint, dtype, device](const ParameterSpec& spec) {
    const Tensor full = refitted(checkpoint, spec.name, spec.full_shape[0]);
    if (full.dtype() == dtype) return full.to(device);
    return Tensor::from_vector(full.to_vector(), full.shape(), dtype, device);
  };
}

void restore_optimizer(GptTrainer& trainer, const GptCheckpoint& checkpoint,
                       const comm::ParallelTopology& topology) {
  AdamW* adamw = adamw_of(trainer);
  if (adamw == nullptr ||
      !checkpoint.full.contains(trainer.parameters().front().name + std::string(kExpAvgSuffix))) {
    throw std::invalid_argument("restore_optimizer: needs AdamW and a checkpoint with moments");
  }
  const Parameters& parameters = trainer.parameters();
  const std::int64_t vocab_rows = trainer.stage().config().vocab_rows();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& p = parameters[i];
    for (auto [suffix, moments] : {std::pair{kExpAvgSuffix, &adamw->exp_avg()},
                                   std::pair{kExpAvgSqSuffix, &adamw->exp_avg_sq()}}) {
      const Tensor slice = tp_slice(refitted(checkpoint, p.name + suffix, vocab_rows), p.split_dim,
                                    topology.tp_rank(), topology.tp());
      // The distributed optimizer keeps the elements of its shard only.
      const ElementRange& shard = adamw->shards()[i];
      const std::vector<double> values = slice.to_vector();
      Tensor& moment = (*moments)[i];
      moment = Tensor::from_vector({values.begin() + shard.begin, values.begin() + shard.end},
                                   moment.shape(), moment.dtype(), moment.device());
    }
  }
  adamw->set_steps(checkpoint.meta.value("optimizer_steps", checkpoint.step));
}

}  // namespace mpitron::nn
