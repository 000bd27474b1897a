#include "nn/checkpoint/hf_llama_config.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {

namespace {

[[noreturn]] void bad_config(const std::string& context, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", context, what));
}

std::int64_t required_size(const nlohmann::json& j, const char* field, const std::string& context) {
  if (!j.contains(field)) bad_config(context, fmt::format("no {}", field));
  const nlohmann::json& v = j.at(field);
  if (!v.is_number_integer() || v.get<std::int64_t>() < 1) {
    bad_config(context, fmt::format("{} {} is not an integer >= 1", field, v.dump()));
  }
  return v.get<std::int64_t>();
}

double number_or(const nlohmann::json& j, const char* field, double fallback,
                 const std::string& context) {
  if (!j.contains(field) || j.at(field).is_null()) return fallback;
  if (!j.at(field).is_number()) {
    bad_config(context, fmt::format("{} {} is not a number", field, j.at(field).dump()));
  }
  return j.at(field).get<double>();
}

// Llama 3's scaling from `s`, an object of rope_type "llama3" read at `where`.
kernels::Llama3RopeScaling llama3_scaling_of(const nlohmann::json& s, const std::string& where) {
  const auto field = [&](const char* name) {
    if (!s.contains(name)) bad_config(where, fmt::format("no {}", name));
    return number_or(s, name, 0.0, where);
  };
  kernels::Llama3RopeScaling scaling;
  scaling.factor = field("factor");
  scaling.low_freq_factor = field("low_freq_factor");
  scaling.high_freq_factor = field("high_freq_factor");
  scaling.original_max_positions = field("original_max_position_embeddings");
  if (scaling.factor == 0.0) {  // 0 means "no scaling" inside mpitron, never in a file
    bad_config(where, "factor 0 is not a finite number >= 1");
  }
  return scaling;
}

// The rope of the object `s` (`name`: rope_scaling, or rope_parameters, transformers' newer form
// which also holds rope_theta): no scaling for rope_type "default", Llama 3's for "llama3";
// another type is refused.
kernels::Llama3RopeScaling rope_of_object(const nlohmann::json& s, const char* name,
                                          const std::string& context) {
  if (!s.is_object()) bad_config(context, fmt::format("{} {} is not an object", name, s.dump()));
  const nlohmann::json type =
      s.contains("rope_type") ? s.at("rope_type") : s.value("type", nlohmann::json());
  if (type == "default") return {};
  if (type != "llama3") {
    bad_config(context, fmt::format("{} of type {} is not supported (mpitron implements "
                                    "\"default\" and \"llama3\")",
                                    name, type.dump()));
  }
  return llama3_scaling_of(s, context + ": " + name);
}

// rope_theta and rope_scaling, from the top-level fields or from rope_parameters; both forms
// present must agree.
void read_rope(const nlohmann::json& j, const std::string& context, HfLlamaConfig& c) {
  c.rope_theta = number_or(j, "rope_theta", c.rope_theta, context);
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) {
    c.rope_scaling = rope_of_object(j.at("rope_scaling"), "rope_scaling", context);
  }
  if (j.contains("rope_parameters") && !j.at("rope_parameters").is_null()) {
    const nlohmann::json& p = j.at("rope_parameters");
    const kernels::Llama3RopeScaling scaling = rope_of_object(p, "rope_parameters", context);
    const double theta = number_or(p, "rope_theta", c.rope_theta, context + ": rope_parameters");
    if ((j.contains("rope_theta") && theta != c.rope_theta) ||
        (j.contains("rope_scaling") && !(scaling == c.rope_scaling))) {
      bad_config(context, "rope_parameters disagrees with rope_theta or rope_scaling");
    }
    c.rope_theta = theta;
    c.rope_scaling = scaling;
  }
  if (const auto error = kernels::rope_error({c.rope_theta, c.rope_scaling})) {
    bad_config(context, *error);
  }
}

// The fields whose non-default value changes the math, refused one by one.
void refuse_unsupported(const nlohmann::json& j, const std::string& context, std::int64_t hidden,
                        std::int64_t heads) {
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act != "silu") {
    bad_config(context,
               fmt::format("hidden_act \"{}\" is not supported (mpitron's SwiGLU uses silu)", act));
  }
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    if (j.contains(bias) && j.at(bias) != false) {
      bad_config(context, fmt::format("{} {} is not supported (mpitron's Llama has no biases)",
                                      bias, j.at(bias).dump()));
    }
  }
  if (j.contains("sliding_window") && !j.at("sliding_window").is_null()) {
    bad_config(context, fmt::format("sliding_window {} is not supported (mpitron's attention sees "
                                    "every earlier token)",
                                    j.at("sliding_window").dump()));
  }
  if (number_or(j, "attention_dropout", 0.0, context) != 0.0) {
    bad_config(context,
               fmt::format("attention_dropout {} is not supported (mpitron has no dropout)",
                           j.at("attention_dropout").dump()));
  }
  if (j.contains("head_dim") && !j.at("head_dim").is_null() && j.at("head_dim") != hidden / heads) {
    bad_config(context, fmt::format("head_dim {} is not hidden_size {} / num_attention_heads {}",
                                    j.at("head_dim").dump(), hidden, heads));
  }
}

}  // namespace

HfLlamaConfig hf_llama_config_from_json(const nlohmann::json& j, const std::string& context) {
  if (!j.is_object()) bad_config(context, "not a JSON object");
  const nlohmann::json type = j.value("model_type", nlohmann::json());
  if (type != "llama") {
    bad_config(context, fmt::format("model_type {} is not \"llama\"", type.dump()));
  }
  HfLlamaConfig c;
  c.hidden = required_size(j, "hidden_size", context);
  c.layers = required_size(j, "num_hidden_layers", context);
  c.heads = required_size(j, "num_attention_heads", context);
  c.ffn_hidden = required_size(j, "intermediate_size", context);
  c.vocab = required_size(j, "vocab_size", context);
  c.kv_heads = j.contains("num_key_value_heads") && !j.at("num_key_value_heads").is_null()
                   ? required_size(j, "num_key_value_heads", context)
                   : c.heads;
  c.max_positions = j.contains("max_position_embeddings")
                        ? required_size(j, "max_position_embeddings", context)
                        : 2048;
  if (c.hidden % c.heads != 0) {
    bad_config(context, fmt::format("hidden_size {} is not divisible by num_attention_heads {}",
                                    c.hidden, c.heads));
  }
  refuse_unsupported(j, context, c.hidden, c.heads);
  c.norm_eps = number_or(j, "rms_norm_eps", 1e-6, context);
  if (!(c.norm_eps > 0.0) || !(c.norm_eps <= std::numeric_limits<float>::max())) {
    bad_config(context,
               fmt::format("rms_norm_eps {} is not a number > 0 finite in float32", c.norm_eps));
  }
  read_rope(j, context, c);
  if (j.contains("tie_word_embeddings")) {
    if (!j.at("tie_word_embeddings").is_boolean()) {
      bad_config(context, fmt::format("tie_word_embeddings {} is not true or false",
                                      j.at("tie_word_embeddings").dump()));
    }
    c.tied_embeddings = j.at("tie_word_embeddings").get<bool>();
  }
  if (j.contains("torch_dtype") && j.at("torch_dtype").is_string()) {
    c.torch_dtype = j.at("torch_dtype").get<std::string>();
  }
  return c;
}

nlohmann::json hf_llama_config_json(const HfLlamaConfig& c) {
  nlohmann::json scaling = nullptr;
  if (c.rope_scaling.active()) {
    // A count of positions: an integer in config.json, as transformers writes it.
    const double positions = c.rope_scaling.original_max_positions;
    const nlohmann::json original_max_positions =
        positions == std::floor(positions) && std::abs(positions) < 9.0e15
            ? nlohmann::json(static_cast<std::int64_t>(positions))
            : nlohmann::json(positions);
    scaling = {{"rope_type", "llama3"},
               {"factor", c.rope_scaling.factor},
               {"low_freq_factor", c.rope_scaling.low_freq_factor},
               {"high_freq_factor", c.rope_scaling.high_freq_factor},
               {"original_max_position_embeddings", original_max_positions}};
  }
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"hidden_size", c.hidden},
          {"num_hidden_layers", c.layers},
          {"num_attention_heads", c.heads},
          {"num_key_value_heads", c.kv_heads},
          {"head_dim", c.hidden / c.heads},
          {"intermediate_size", c.ffn_hidden},
          {"vocab_size", c.vocab},
          {"max_position_embeddings", c.max_positions},
          {"rms_norm_eps", c.norm_eps},
          {"rope_theta", c.rope_theta},
          {"rope_scaling", scaling},
          {"tie_word_embeddings", c.tied_embeddings},
          {"torch_dtype", c.torch_dtype}};
}

}  // namespace mpitron::nn
