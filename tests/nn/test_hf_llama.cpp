// Hugging Face Llama folders: write and read back (float32 exactly, bfloat16 rounded), shards
// under model.safetensors.index.json, and one line for each refused config field and each kind
// of damage.
#include "nn/checkpoint/hf_llama.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "autograd/random.h"
#include "kernels/bf16.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::nn {
namespace {

using autograd::Shape;
using autograd::Tensor;
using test::message_of;
using test::names;

/// A tiny Llama: C 8, 2 layers, 4 heads, 2 kv heads, F 12, V 10.
HfLlamaConfig tiny_config(bool tied) {
  HfLlamaConfig c;
  c.vocab = 10;
  c.hidden = 8;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.ffn_hidden = 12;
  c.max_positions = 64;
  c.norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.tied_embeddings = tied;
  return c;
}

/// Random weights of `config` under mpitron's names.
HfLlamaWeights tiny_weights(const HfLlamaConfig& c) {
  HfLlamaWeights w{c, {}};
  std::uint64_t seed = 1;
  const auto add = [&](const std::string& name, const Shape& shape) {
    w.tensors[name] = autograd::randn(shape, seed++, 0.5);
  };
  add("transformer.wte.weight", {c.vocab, c.hidden});
  for (int i = 0; i < c.layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    add(h + "ln_1.weight", {c.hidden});
    add(h + "attn.q.weight", {c.hidden, c.hidden});
    add(h + "attn.k.weight", {4, c.hidden});
    add(h + "attn.v.weight", {4, c.hidden});
    add(h + "attn.c_proj.weight", {c.hidden, c.hidden});
    add(h + "ln_2.weight", {c.hidden});
    add(h + "mlp.gate.weight", {c.ffn_hidden, c.hidden});
    add(h + "mlp.up.weight", {c.ffn_hidden, c.hidden});
    add(h + "mlp.c_proj.weight", {c.hidden, c.ffn_hidden});
  }
  add("transformer.ln_f.weight", {c.hidden});
  if (!c.tied_embeddings) add("lm_head.weight", {c.vocab, c.hidden});
  return w;
}

class HfLlama : public test::ScratchDirTest {
 protected:
  /// Writes `json` as dir/m/config.json beside a valid tiny model.safetensors, and returns the
  /// CheckpointError of reading the folder.
  std::string config_error(const nlohmann::json& json) {
    write_hf_llama(dir / "m", tiny_weights(tiny_config(true)), StoredDType::f32);
    std::ofstream(dir / "m" / "config.json") << json.dump();
    return message_of<CheckpointError>([&] { read_hf_llama(dir / "m"); });
  }
  nlohmann::json good_config() { return hf_llama_config_json(tiny_config(true)); }
};

TEST_F(HfLlama, Float32RoundTripIsExactUnderHuggingFaceNames) {
  for (const bool tied : {true, false}) {
    const HfLlamaWeights written = tiny_weights(tiny_config(tied));
    const auto folder = dir / (tied ? "tied" : "untied");
    write_hf_llama(folder, written, StoredDType::f32);
    SafetensorsReader file(folder / "model.safetensors");
    EXPECT_NE(file.find("model.layers.1.self_attn.k_proj.weight"), nullptr);
    EXPECT_EQ(file.find("lm_head.weight") != nullptr, !tied);
    EXPECT_EQ(file.entries()[0].name, "model.embed_tokens.weight");
    for (const char* path : {"", "config.json", "model.safetensors"}) {
      const HfLlamaWeights read = read_hf_llama(*path ? folder / path : folder);
      EXPECT_EQ(read.config.kv_heads, 2);
      EXPECT_EQ(read.config.tied_embeddings, tied);
      EXPECT_EQ(read.config.rope_theta, 500000.0);
      ASSERT_EQ(read.tensors.size(), written.tensors.size());
      for (const auto& [name, tensor] : written.tensors)
        EXPECT_EQ(read.tensors.at(name).to_vector(), tensor.to_vector()) << name;
    }
  }
  EXPECT_TRUE(is_hf_llama_path(dir / "tied"));
  EXPECT_TRUE(is_hf_llama_path(dir / "tied" / "model.safetensors"));
  EXPECT_FALSE(is_hf_llama_path(dir / "gpt2.bin"));
}

TEST_F(HfLlama, ConfigJsonRoundTripsWithLlama3Scaling) {
  HfLlamaConfig c = tiny_config(false);
  c.rope_scaling = {32.0, 1.0, 4.0, 8192.0};
  const nlohmann::json j = hf_llama_config_json(c);
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(j["head_dim"], 2);
  EXPECT_TRUE(j["rope_scaling"]["original_max_position_embeddings"].is_number_integer());
  const HfLlamaConfig back = hf_llama_config_from_json(j, "config.json");
  EXPECT_EQ(back.rope_scaling, c.rope_scaling);
  EXPECT_EQ(back.max_positions, 64);
  // transformers' newer form: rope_theta and the scaling inside rope_parameters.
  nlohmann::json newer = j;
  newer.erase("rope_theta");
  newer.erase("rope_scaling");
  newer["rope_parameters"] = j["rope_scaling"];
  newer["rope_parameters"]["rope_theta"] = 250000.0;
  const HfLlamaConfig from_parameters = hf_llama_config_from_json(newer, "config.json");
  EXPECT_EQ(from_parameters.rope_theta, 250000.0);
  EXPECT_EQ(from_parameters.rope_scaling, c.rope_scaling);
  newer["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000.0}};
  const HfLlamaConfig unscaled = hf_llama_config_from_json(newer, "config.json");
  EXPECT_EQ(unscaled.rope_theta, 1000.0);
  EXPECT_FALSE(unscaled.rope_scaling.active());
  // rope_type "default" in rope_scaling is no scaling.
  nlohmann::json plain = j;
  plain["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_FALSE(hf_llama_config_from_json(plain, "config.json").rope_scaling.active());
  // Older files say "type"; absent fields take LlamaConfig's defaults.
  nlohmann::json old = {{"model_type", "llama"},
                        {"hidden_size", 8},
                        {"num_hidden_layers", 1},
                        {"num_attention_heads", 2},
                        {"intermediate_size", 4},
                        {"vocab_size", 5},
                        {"rope_scaling",
                         {{"type", "llama3"},
                          {"factor", 8.0},
                          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}}}};
  const HfLlamaConfig defaults = hf_llama_config_from_json(old, "config.json");
  EXPECT_EQ(defaults.kv_heads, 2);
  EXPECT_EQ(defaults.norm_eps, 1e-6);
  EXPECT_FALSE(defaults.tied_embeddings);
  EXPECT_EQ(defaults.rope_scaling.factor, 8.0);
}

TEST_F(HfLlama, Bf16FolderRoundsAndReadsAsFloat32) {
  const HfLlamaWeights written = tiny_weights(tiny_config(false));
  write_hf_llama(dir / "b", written, StoredDType::bf16);
  SafetensorsReader file(dir / "b" / "model.safetensors");
  EXPECT_EQ(file.entries()[0].dtype, StoredDType::bf16);
  const HfLlamaWeights read = read_hf_llama(dir / "b");
  EXPECT_EQ(read.config.torch_dtype, "bfloat16");
  for (const auto& [name, tensor] : written.tensors) {
    std::vector<double> rounded = tensor.to_vector();
    for (double& v : rounded)
      v = kernels::bf16_to_float(kernels::to_bf16(static_cast<float>(v)));
    EXPECT_EQ(read.tensors.at(name).to_vector(), rounded) << name;
  }
}

TEST_F(HfLlama, ShardsListedByTheIndexAreRead) {
  write_hf_llama(dir / "one", tiny_weights(tiny_config(true)), StoredDType::f32);
  SafetensorsReader whole(dir / "one" / "model.safetensors");
  std::vector<NamedTensor> first, second;
  nlohmann::json map;
  for (const SafetensorsEntry& e : whole.entries()) {
    const bool early = e.name.starts_with("model.embed") || e.name.starts_with("model.layers.0.");
    (early ? first : second).push_back({e.name, whole.read_tensor(e.name)});
    map[e.name] = early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  const auto sharded = dir / "sharded";
  std::filesystem::create_directories(sharded);
  std::filesystem::copy_file(dir / "one" / "config.json", sharded / "config.json");
  write_safetensors(sharded / "model-00001-of-00002.safetensors", first);
  write_safetensors(sharded / "model-00002-of-00002.safetensors", second);
  std::ofstream(sharded / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  const HfLlamaWeights read = read_hf_llama(sharded);
  const HfLlamaWeights expected = read_hf_llama(dir / "one");
  for (const auto& [name, tensor] : expected.tensors)
    EXPECT_EQ(read.tensors.at(name).to_vector(), tensor.to_vector()) << name;

  std::filesystem::remove(sharded / "model-00002-of-00002.safetensors");
  EXPECT_THAT(message_of<CheckpointError>([&] { read_hf_llama(sharded); }),
              names("model-00002-of-00002.safetensors: missing shard listed by "
                    "model.safetensors.index.json"));
}

TEST_F(HfLlama, EachRefusedConfigFieldIsOneLine) {
  const auto with = [this](const char* field, const nlohmann::json& value) {
    nlohmann::json j = good_config();
    j[field] = value;
    return j;
  };
  EXPECT_THAT(config_error(with("model_type", "mistral")),
              names("config.json: model_type \"mistral\" is not \"llama\""));
  EXPECT_THAT(config_error(with("attention_bias", true)),
              names("attention_bias true is not supported"));
  EXPECT_THAT(config_error(with("mlp_bias", true)), names("mlp_bias true is not supported"));
  EXPECT_THAT(config_error(with("sliding_window", 4096)),
              names("sliding_window 4096 is not supported"));
  EXPECT_THAT(config_error(with("hidden_act", "gelu")),
              names("hidden_act \"gelu\" is not supported"));
  EXPECT_THAT(config_error(with("head_dim", 4)),
              names("head_dim 4 is not hidden_size 8 / num_attention_heads 4"));
  EXPECT_THAT(config_error(with("attention_dropout", 0.1)),
              names("attention_dropout 0.1 is not supported"));
  EXPECT_THAT(config_error(with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}})),
              names("rope_scaling of type \"yarn\" is not supported"));
  EXPECT_THAT(config_error(with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 4.0}})),
              names("rope_scaling: no low_freq_factor"));
  const nlohmann::json llama3 = {{"rope_type", "llama3"},
                                 {"factor", 0.0},
                                 {"low_freq_factor", 1.0},
                                 {"high_freq_factor", 4.0},
                                 {"original_max_position_embeddings", 64}};
  EXPECT_THAT(config_error(with("rope_scaling", llama3)),
              names("config.json: rope_scaling: factor 0 is not a finite number >= 1"));
  EXPECT_THAT(config_error(with("rope_theta", -1.0)),
              names("config.json: theta -1 is not a finite number > 0"));
  EXPECT_THAT(config_error(with("rms_norm_eps", 0.0)),
              names("config.json: rms_norm_eps 0 is not a number > 0 finite in float32"));
  EXPECT_THAT(config_error(with("rms_norm_eps", 1e39)),
              names("config.json: rms_norm_eps 1e+39 is not a number > 0 finite in float32"));
  EXPECT_THAT(config_error(with("rope_parameters", {{"rope_type", "dynamic"}})),
              names("rope_parameters of type \"dynamic\" is not supported"));
  EXPECT_THAT(
      config_error(with("rope_parameters", {{"rope_type", "default"}, {"rope_theta", 7.0}})),
      names("config.json: rope_parameters disagrees with rope_theta or rope_scaling"));
  nlohmann::json no_vocab = good_config();
  no_vocab.erase("vocab_size");
  EXPECT_THAT(config_error(no_vocab), names("config.json: no vocab_size"));
}

TEST_F(HfLlama, MissingUnexpectedMisshapenAndUntiedHeadsAreOneLine) {
  HfLlamaWeights w = tiny_weights(tiny_config(true));
  write_hf_llama(dir / "m", w, StoredDType::f32);
  SafetensorsReader whole(dir / "m" / "model.safetensors");
  std::vector<NamedTensor> tensors = whole.read_all();
  const auto rewrite = [&](std::vector<NamedTensor> t) {
    write_safetensors(dir / "m" / "model.safetensors", t);
    return message_of<CheckpointError>([&] { read_hf_llama(dir / "m"); });
  };
  std::vector<NamedTensor> missing(tensors.begin() + 1, tensors.end());
  EXPECT_THAT(rewrite(missing), names("missing tensor 'model.embed_tokens.weight'"));
  std::vector<NamedTensor> extra = tensors;
  extra.push_back({"model.layers.0.self_attn.q_proj.bias", Tensor::zeros({8})});
  EXPECT_THAT(rewrite(extra), names("unexpected tensor 'model.layers.0.self_attn.q_proj.bias'"));
  std::vector<NamedTensor> head = tensors;
  head.push_back({"lm_head.weight", Tensor::zeros({10, 8})});
  EXPECT_THAT(rewrite(head), names("lm_head.weight differs from model.embed_tokens.weight"));
  std::vector<NamedTensor> misshapen = tensors;
  misshapen[0].value = Tensor::zeros({11, 8});
  EXPECT_THAT(rewrite(misshapen), names("tensor 'model.embed_tokens.weight' has shape [11, 8], "
                                        "config.json implies [10, 8]"));
  std::vector<NamedTensor> with_buffer = tensors;
  with_buffer.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros({1})});
  write_safetensors(dir / "m" / "model.safetensors", with_buffer);
  EXPECT_EQ(read_hf_llama(dir / "m").tensors.size(), w.tensors.size());
}

// A stale index beside model.safetensors (an export into a sharded folder, before export refused
// that) does not win: the folder's single file is read, as transformers reads it, unless the
// index is named.
TEST_F(HfLlama, ModelSafetensorsWinsOverAStaleIndexUnlessTheIndexIsNamed) {
  const HfLlamaWeights old_weights = tiny_weights(tiny_config(true));
  write_hf_llama(dir / "m", old_weights, StoredDType::f32);
  std::filesystem::rename(dir / "m" / "model.safetensors",
                          dir / "m" / "model-00001-of-00001.safetensors");
  SafetensorsReader shard(dir / "m" / "model-00001-of-00001.safetensors");
  nlohmann::json map;
  for (const SafetensorsEntry& e : shard.entries())
    map[e.name] = "model-00001-of-00001.safetensors";
  std::ofstream(dir / "m" / "model.safetensors.index.json")
      << nlohmann::json{{"weight_map", map}}.dump();
  HfLlamaWeights fresh = old_weights;
  fresh.tensors["transformer.ln_f.weight"] = Tensor::full({8}, 3.0);
  EXPECT_THAT(
      message_of<CheckpointError>([&] { write_hf_llama(dir / "m", fresh, StoredDType::f32); }),
      names("holds model.safetensors.index.json (a sharded model), whose shards would "
            "stay beside the new model.safetensors: write into another folder"));
  EXPECT_EQ(hf_llama_write_refusal(dir / "m").empty(), false);
  write_hf_llama(dir / "fresh", fresh, StoredDType::f32);
  std::filesystem::copy_file(dir / "fresh" / "model.safetensors", dir / "m" / "model.safetensors");
  const auto ln_f = [](const HfLlamaWeights& w) {
    return w.tensors.at("transformer.ln_f.weight").to_vector();
  };
  for (const char* path : {"", "config.json", "model.safetensors"})
    EXPECT_EQ(ln_f(read_hf_llama(dir / "m" / path)), ln_f(fresh)) << path;
  EXPECT_EQ(ln_f(read_hf_llama(dir / "m" / "model.safetensors.index.json")), ln_f(old_weights));
}

// A Llama model.safetensors without its config.json is still recognised by its tensor names,
// and reading it says what is missing (not a GPT-2 reader's "missing tensor 'wte.weight'").
TEST_F(HfLlama, ALoneLlamaFileNamesItsMissingConfig) {
  write_hf_llama(dir / "m", tiny_weights(tiny_config(true)), StoredDType::f32);
  std::filesystem::remove(dir / "m" / "config.json");
  EXPECT_TRUE(is_hf_llama_path(dir / "m" / "model.safetensors"));
  EXPECT_THAT(message_of<CheckpointError>([&] { read_hf_llama(dir / "m" / "model.safetensors"); }),
              names("config.json: missing: a Hugging Face Llama model's sizes are in the "
                    "config.json beside its weights"));
}

// F16 tensors (half precision, as many Llama files are published) read as float32 exactly: a
// BF16 folder whose header is relabelled F16 reads each stored 16 bits as a half.
TEST_F(HfLlama, F16TensorsReadAsFloat32) {
  write_hf_llama(dir / "m", tiny_weights(tiny_config(true)), StoredDType::bf16);
  const auto path = dir / "m" / "model.safetensors";
  const Tensor stored = rounded_to_bf16(SafetensorsReader(path).read_tensor(
      "model.embed_tokens.weight"));  // the file's bits: widening and rounding are exact
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  std::uint64_t length = 0;
  file.read(reinterpret_cast<char*>(&length), sizeof length);
  std::string header(length, '\0');
  file.read(header.data(), static_cast<std::streamsize>(length));
  for (std::size_t at = header.find("\"BF16\""); at != std::string::npos;
       at = header.find("\"BF16\"", at)) {
    header.replace(at, 6, "\"F16\" ");  // the same length, so the offsets stay
  }
  file.seekp(sizeof length);
  file.write(header.data(), static_cast<std::streamsize>(header.size()));
  file.close();
  EXPECT_EQ(SafetensorsReader(path).entries()[0].dtype, StoredDType::f16);
  std::vector<double> expected;
  const auto* bits = static_cast<const kernels::bf16*>(stored.buffer().data());
  for (std::int64_t i = 0; i < stored.numel(); ++i)
    expected.push_back(half_to_float(bits[i].bits));
  EXPECT_EQ(read_hf_llama(dir / "m").tensors.at("transformer.wte.weight").to_vector(), expected);
}

}  // namespace
}  // namespace mpitron::nn
