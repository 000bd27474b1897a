#include "nn/checkpoint/hf_llama.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <vector>

#include "autograd/ops.h"
#include "nn/checkpoint/atomic_file.h"

namespace mpitron::nn {

namespace {

using autograd::Shape;
using autograd::Tensor;
namespace fs = std::filesystem;

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

[[noreturn]] void refuse(const std::string& context, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", context, what));
}

/// One parameter: mpitron's name, Hugging Face's, the full shape.
struct Correspondence {
  std::string ours, theirs;
  Shape shape;
};

/// The table at the top of hf_llama.h for `c`, in its order.
std::vector<Correspondence> correspondences(const HfLlamaConfig& c) {
  const std::int64_t C = c.hidden, F = c.ffn_hidden, KD = c.kv_heads * (c.hidden / c.heads);
  std::vector<Correspondence> table = {
      {"transformer.wte.weight", "model.embed_tokens.weight", {c.vocab, C}}};
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string ours = fmt::format("transformer.h.{}.", i);
    const std::string theirs = fmt::format("model.layers.{}.", i);
    const Correspondence block[] = {{"ln_1.weight", "input_layernorm.weight", {C}},
                                    {"attn.q.weight", "self_attn.q_proj.weight", {C, C}},
                                    {"attn.k.weight", "self_attn.k_proj.weight", {KD, C}},
                                    {"attn.v.weight", "self_attn.v_proj.weight", {KD, C}},
                                    {"attn.c_proj.weight", "self_attn.o_proj.weight", {C, C}},
                                    {"ln_2.weight", "post_attention_layernorm.weight", {C}},
                                    {"mlp.gate.weight", "mlp.gate_proj.weight", {F, C}},
                                    {"mlp.up.weight", "mlp.up_proj.weight", {F, C}},
                                    {"mlp.c_proj.weight", "mlp.down_proj.weight", {C, F}}};
    for (const Correspondence& part : block) {
      table.push_back({ours + part.ours, theirs + part.theirs, part.shape});
    }
  }
  table.push_back({"transformer.ln_f.weight", "model.norm.weight", {C}});
  if (!c.tied_embeddings) table.push_back({"lm_head.weight", "lm_head.weight", {c.vocab, C}});
  return table;
}

void require_finite(const Tensor& t, const std::string& file, const std::string& name) {
  const std::vector<double> values = t.to_vector();
  const auto bad =
      std::count_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
  if (bad > 0) {
    refuse(file, fmt::format("tensor {} holds {} non-finite values (NaN or infinite) of {}", name,
                             bad, values.size()));
  }
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  if (!file) refuse(path.string(), "cannot open the file");
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& e) {
    refuse(path.string(), fmt::format("bad JSON: {}", e.what()));
  }
}

fs::path folder_of(const fs::path& path) {
  if (fs::is_directory(path)) return path;
  return path.parent_path().empty() ? fs::path(".") : path.parent_path();
}

/// The safetensors files of `folder` and, for each tensor, the file that holds it.
struct WeightFiles {
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers;  // by file name
  std::map<std::string, SafetensorsReader*> holder;                   // by tensor name
};

// Whether the weights of `path` (is_hf_llama_path) are the shards of an index: when it names
// the index, or names the folder or its config.json and the folder has an index and no
// model.safetensors (transformers' order: the single file first).
bool reads_index(const fs::path& path, const fs::path& folder) {
  const std::string name = path.filename().string();
  if (name == kIndex) return true;
  if (name == kWeights) return false;
  return !fs::exists(folder / kWeights) && fs::exists(folder / kIndex);
}

WeightFiles open_weights(const fs::path& folder, bool index_files) {
  WeightFiles files;
  const fs::path index = folder / kIndex;
  if (!index_files) {
    auto reader = std::make_unique<SafetensorsReader>(folder / kWeights);
    for (const SafetensorsEntry& e : reader->entries())
      files.holder[e.name] = reader.get();
    files.readers[kWeights] = std::move(reader);
    return files;
  }
  const nlohmann::json j = read_json(index);
  if (!j.contains("weight_map") || !j.at("weight_map").is_object()) {
    refuse(index.string(), "no \"weight_map\" object");
  }
  for (const auto& [tensor, shard] : j.at("weight_map").items()) {
    if (!shard.is_string())
      refuse(index.string(), fmt::format("'{}' maps to {}", tensor, shard.dump()));
    const std::string file = shard.get<std::string>();
    if (!files.readers.contains(file)) {
      if (!fs::exists(folder / file)) {
        refuse((folder / file).string(), fmt::format("missing shard listed by {}", kIndex));
      }
      files.readers[file] = std::make_unique<SafetensorsReader>(folder / file);
    }
    SafetensorsReader* reader = files.readers[file].get();
    if (reader->find(tensor) == nullptr) {
      refuse(reader->path().string(),
             fmt::format("no tensor '{}', which {} places here", tensor, kIndex));
    }
    files.holder[tensor] = reader;
  }
  for (const auto& [file, reader] : files.readers) {
    for (const SafetensorsEntry& e : reader->entries()) {
      if (!files.holder.contains(e.name)) {
        refuse(reader->path().string(), fmt::format("tensor '{}' is not in {}", e.name, kIndex));
      }
    }
  }
  return files;
}

bool is_rotary_buffer(const std::string& name) {
  return name.ends_with(".self_attn.rotary_emb.inv_freq");
}

}  // namespace

bool is_hf_llama_path(const fs::path& path) {
  if (fs::is_directory(path)) return true;
  const std::string name = path.filename().string();
  if (name == kConfig || name == kIndex) return true;
  if (name != kWeights) return false;
  const fs::path config = folder_of(path) / kConfig;
  if (!fs::exists(config)) {
    // Without its config.json a Llama file is still one by its tensor names (read_hf_llama then
    // says what is missing).
    try {
      return SafetensorsReader(path).find("model.embed_tokens.weight") != nullptr;
    } catch (const CheckpointError&) {
      return false;  // the GPT-2 readers report the damage
    }
  }
  std::ifstream file(config);
  const nlohmann::json j = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("model_type", nlohmann::json()) == "llama";
}

HfLlamaWeights read_hf_llama(const fs::path& path) {
  const fs::path folder = folder_of(path);
  const fs::path config_path = folder / kConfig;
  if (!fs::exists(config_path)) {
    refuse(config_path.string(),
           "missing: a Hugging Face Llama model's sizes are in the config.json beside its weights");
  }
  HfLlamaWeights weights;
  weights.config = hf_llama_config_from_json(read_json(config_path), config_path.string());
  WeightFiles files = open_weights(folder, reads_index(path, folder));
  std::set<std::string> taken;
  for (const Correspondence& c : correspondences(weights.config)) {
    const auto it = files.holder.find(c.theirs);
    if (it == files.holder.end()) {
      refuse(folder.string(), fmt::format("missing tensor '{}'", c.theirs));
    }
    SafetensorsReader& reader = *it->second;
    const SafetensorsEntry& e = *reader.find(c.theirs);
    if (e.shape != c.shape) {
      refuse(reader.path().string(),
             fmt::format("tensor '{}' has shape {}, config.json implies {}", c.theirs,
                         autograd::to_string(e.shape), autograd::to_string(c.shape)));
    }
    Tensor tensor = reader.read_float32(c.theirs);
    require_finite(tensor, reader.path().string(), c.theirs);
    weights.stored_bfloat16 |= e.dtype == StoredDType::bf16;
    weights.tensors.emplace(c.ours, std::move(tensor));
    taken.insert(c.theirs);
  }
  for (const auto& [name, reader] : files.holder) {
    if (taken.contains(name) || is_rotary_buffer(name)) continue;
    if (name == "lm_head.weight" && weights.config.tied_embeddings) {
      const Tensor head = reader->read_float32(name);
      if (head.shape() != Shape{weights.config.vocab, weights.config.hidden} ||
          head.to_vector() != weights.tensors.at("transformer.wte.weight").to_vector()) {
        refuse(reader->path().string(),
               "lm_head.weight differs from model.embed_tokens.weight, but config.json says "
               "tie_word_embeddings");
      }
      continue;
    }
    refuse(reader->path().string(), fmt::format("unexpected tensor '{}'", name));
  }
  return weights;
}

std::string hf_llama_write_refusal(const fs::path& folder) {
  if (!fs::exists(folder / kIndex)) return "";
  // Readers (mpitron's and transformers') take model.safetensors first, but the shards would
  // stay beside it, stale.
  return fmt::format(
      "holds {} (a sharded model), whose shards would stay beside the new {}: "
      "write into another folder",
      kIndex, kWeights);
}

void write_hf_llama(const fs::path& folder, const HfLlamaWeights& weights, StoredDType storage,
                    const SafetensorsMetadata& metadata) {
  if (storage != StoredDType::f32 && storage != StoredDType::bf16) {
    throw std::invalid_argument("hf llama: tensors are stored as F32 or BF16, not " +
                                to_string(storage));
  }
  const HfLlamaConfig& config = weights.config;
  const std::vector<Correspondence> table = correspondences(config);
  if (weights.tensors.size() != table.size()) {
    throw std::invalid_argument(fmt::format("hf llama: {} tensors, the config has {}",
                                            weights.tensors.size(), table.size()));
  }
  std::vector<NamedTensor> tensors;
  for (const Correspondence& c : table) {
    const auto it = weights.tensors.find(c.ours);
    if (it == weights.tensors.end()) {
      throw std::invalid_argument(fmt::format("hf llama: missing tensor '{}'", c.ours));
    }
    Tensor tensor = it->second;
    if (tensor.dtype() != autograd::DType::f32) {  // a float64 run's parameters
      tensor = Tensor::from_vector(tensor.to_vector(), tensor.shape());
    }
    const bool vocab_rows = c.shape.size() == 2 && c.shape[0] == config.vocab &&
                            (c.ours == "transformer.wte.weight" || c.ours == "lm_head.weight");
    if (vocab_rows && tensor.ndim() == 2 && tensor.size(0) > config.vocab) {
      autograd::NoGradGuard no_grad;
      tensor = autograd::narrow(tensor, 0, 0, config.vocab);
    }
    if (tensor.shape() != c.shape) {
      throw std::invalid_argument(fmt::format("hf llama: tensor '{}' has shape {}, expected {}",
                                              c.ours, autograd::to_string(tensor.shape()),
                                              autograd::to_string(c.shape)));
    }
    tensors.push_back({c.theirs, storage == StoredDType::bf16 ? rounded_to_bf16(tensor) : tensor});
  }
  if (const std::string why = hf_llama_write_refusal(folder); !why.empty()) {
    throw CheckpointError(fmt::format("{}: {}", folder.string(), why));
  }
  fs::create_directories(folder);
  HfLlamaConfig written = config;
  written.torch_dtype = storage == StoredDType::bf16 ? "bfloat16" : "float32";
  SafetensorsMetadata meta = metadata;
  meta["format"] = "pt";
  write_safetensors(folder / kWeights, tensors, meta);
  const std::string text = hf_llama_config_json(written).dump(2) + "\n";
  AtomicFile file(folder / kConfig);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace mpitron::nn
