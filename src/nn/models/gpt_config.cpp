#include "nn/models/gpt_config.h"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "nn/models/block_parameters.h"
#include "nn/models/gpt_pretrained.h"

namespace mpitron::nn {

namespace {

// The weights of one block's matmuls: q and the output projection C x C each, k and v
// C x kv_heads head_dim each, and the MLP's two (GELU) or three (SwiGLU) C x F matrices.
double block_matmul_weights(const GptConfig& c) {
  const auto C = static_cast<double>(c.hidden), F = static_cast<double>(c.ffn_size());
  const double kv = C * static_cast<double>(c.kv_head_count()) / static_cast<double>(c.heads);
  return 2.0 * C * C + 2.0 * C * kv + (c.llama() ? 3.0 : 2.0) * C * F;
}

}  // namespace

double gpt_flops_per_token(const GptConfig& c, std::int64_t seq) {
  const auto layers = static_cast<double>(c.layers), hidden = static_cast<double>(c.hidden);
  const double matmul_weights =
      layers * block_matmul_weights(c) + static_cast<double>(c.vocab_rows()) * hidden;
  return 6.0 * matmul_weights + 12.0 * layers * hidden * static_cast<double>(seq);
}

double gpt_step_memory_bytes(const GptConfig& c, int tp, int pp, std::int64_t micro_batch,
                             std::int64_t seq, std::int64_t in_flight, std::size_t dtype_bytes,
                             bool recompute, int state_shards) {
  const double C = static_cast<double>(c.hidden), L = static_cast<double>(c.layers);
  const double a = static_cast<double>(c.heads), s = static_cast<double>(seq);
  const double b = static_cast<double>(micro_batch), bytes = static_cast<double>(dtype_bytes);
  const double embeddings = static_cast<double>(c.vocab_rows() * (c.tied_embeddings ? 1 : 2)) * C +
                            (c.llama() ? 0.0 : static_cast<double>(c.block_size) * C);
  const double parameters = L * (block_matmul_weights(c) + 13.0 * C) / (tp * pp) + embeddings / tp;
  const double activations_per_block = s * b * (34.0 * C + 2.0 * a) * (bytes / 2.0) / tp;
  const double blocks_in_flight = (L / pp) * static_cast<double>(in_flight);
  const double states = (2.0 + 2.0 / state_shards) * parameters * bytes;
  if (recompute) return states + s * b * C * bytes * blocks_in_flight + activations_per_block;
  return states + activations_per_block * blocks_in_flight;
}

std::int64_t padded_vocab_size(std::int64_t vocab, int tp) {
  if (vocab < 1 || tp < 1) {
    throw std::invalid_argument(
        fmt::format("padded_vocab_size: vocab {} and tp {} must be >= 1", vocab, tp));
  }
  const std::int64_t multiple = std::lcm<std::int64_t>(128, tp);
  return (vocab + multiple - 1) / multiple * multiple;
}

std::optional<GptConfig> model_preset(const std::string& name) {
  const struct {
    const char* name;
    std::int64_t layers, hidden, heads;
  } gpt2[] = {{"gpt2", 12, 768, 12},
              {"gpt2-medium", 24, 1024, 16},
              {"gpt2-large", 36, 1280, 20},
              {"gpt2-xl", 48, 1600, 25}};
  for (const auto& m : gpt2) {
    if (name == m.name) {
      return GptConfig{50257, 1024, m.layers, m.hidden, m.heads, 0, GeluForm::tanh};
    }
  }
  // Each llama preset is its config.json, in HfLlamaConfig's order: vocab_size, hidden_size,
  // num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size,
  // max_position_embeddings, rms_norm_eps, rope_theta, tie_word_embeddings, rope_scaling.
  const struct {
    const char* name;
    HfLlamaConfig config;
  } llama[] = {
      {"smollm-135m", {49152, 576, 30, 9, 3, 1536, 2048, 1e-5, 10000.0, true, {}}},
      {"smollm2-360m", {49152, 960, 32, 15, 5, 2560, 8192, 1e-5, 100000.0, true, {}}},
      {"tinyllama-1.1b", {32000, 2048, 22, 32, 4, 5632, 2048, 1e-5, 10000.0, false, {}}},
      {"llama-3.2-1b",
       {128256, 2048, 16, 32, 8, 8192, 131072, 1e-5, 500000.0, true, {32.0, 1.0, 4.0, 8192.0}}},
      {"llama-3-8b", {128256, 4096, 32, 32, 8, 14336, 8192, 1e-5, 500000.0, false, {}}}};
  for (const auto& m : llama) {
    if (name == m.name) return gpt_config_of(m.config);
  }
  return std::nullopt;
}

const char* model_preset_names() {
  return "gpt2, gpt2-medium, gpt2-large, gpt2-xl, smollm-135m, smollm2-360m, tinyllama-1.1b, "
         "llama-3.2-1b, llama-3-8b";
}

const char* to_string(Arch arch) {
  return arch == Arch::llama ? "llama" : "gpt2";
}

Arch arch_from_string(const std::string& name) {
  if (name == "gpt2") return Arch::gpt2;
  if (name == "llama") return Arch::llama;
  throw std::invalid_argument("--arch '" + name + "' is not one of: gpt2, llama");
}

const char* to_string(GeluForm form) {
  return form == GeluForm::tanh ? "tanh" : "erf";
}

GeluForm gelu_form_from_string(const std::string& name) {
  if (name == "erf") return GeluForm::exact;
  if (name == "tanh") return GeluForm::tanh;
  throw std::invalid_argument("GELU form '" + name + "' is not one of: erf, tanh");
}

Tensor fit_vocab_rows(const Tensor& wte, std::int64_t vocab, std::int64_t rows_wanted) {
  if (wte.ndim() != 2 || wte.size(0) < vocab || rows_wanted < vocab) {
    throw std::invalid_argument(
        fmt::format("fit_vocab_rows: token embedding {} cannot hold vocab {} in {} rows",
                    autograd::to_string(wte.shape()), vocab, rows_wanted));
  }
  if (wte.size(0) == rows_wanted) return wte;
  autograd::NoGradGuard no_grad;
  const Tensor used = autograd::narrow(wte, 0, 0, vocab);
  if (rows_wanted == vocab) return used;
  return autograd::concat(
      {used, Tensor::zeros({rows_wanted - vocab, wte.size(1)}, wte.dtype(), wte.device())}, 0);
}

std::optional<std::string> gpt_size_error(const GptConfig& c, int tp, int pp, int virtual_stages) {
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"vocab", c.vocab},   {"block size", c.block_size},
      {"layers", c.layers}, {"hidden", c.hidden},
      {"heads", c.heads},   {"tp", tp},
      {"pp", pp},           {"virtual stages", virtual_stages}};
  for (const auto& [name, value] : sizes) {
    if (value < 1) return fmt::format("{} must be >= 1, got {}", name, value);
  }
  if (c.hidden % c.heads != 0) {
    return fmt::format("hidden {} is not divisible by heads {}", c.hidden, c.heads);
  }
  if (c.heads % tp != 0) return fmt::format("heads {} is not divisible by tp {}", c.heads, tp);
  if (!c.llama() &&
      (c.kv_head_count() != c.heads || c.ffn_size() != 4 * c.hidden || !c.tied_embeddings)) {
    return std::string(
        "kv heads, ffn hidden and untied embeddings are llama choices (gpt2: kv heads = heads, "
        "ffn hidden = 4 hidden, tied)");
  }
  const std::int64_t kv = c.kv_head_count();
  if (kv < 1 || c.heads % kv != 0) {
    return fmt::format("heads {} is not divisible by kv heads {}", c.heads, kv);
  }
  if (kv % tp != 0) {
    return fmt::format(
        "kv heads {} is not divisible by tp {} (each TP rank holds whole key/value heads)", kv, tp);
  }
  if (c.llama() && (c.hidden / c.heads) % 2 != 0) {
    return fmt::format("head size {} (hidden {} / heads {}) is odd; rotary embedding pairs halves",
                       c.hidden / c.heads, c.hidden, c.heads);
  }
  if (c.ffn_size() < 1 || c.ffn_size() % tp != 0) {
    return fmt::format("ffn hidden {} is not divisible by tp {}", c.ffn_size(), tp);
  }
  if (!(c.norm_eps > 0.0 && std::isfinite(c.norm_eps))) {
    return fmt::format("norm eps must be a finite positive number, got {}", c.norm_eps);
  }
  if (!(c.rope_theta > 0.0 && std::isfinite(c.rope_theta))) {
    return fmt::format("rope theta must be a finite positive number, got {}", c.rope_theta);
  }
  if (const auto error = kernels::rope_error(c.rope())) return *error;
  if (c.padded_vocab == 0 && c.vocab % tp != 0) {
    return fmt::format("vocab {} is not divisible by tp {}", c.vocab, tp);
  }
  if (c.padded_vocab != 0 && c.padded_vocab < c.vocab) {
    return fmt::format("padded vocab {} is smaller than vocab {}", c.padded_vocab, c.vocab);
  }
  if (c.padded_vocab % tp != 0) {
    return fmt::format("padded vocab {} is not divisible by tp {}", c.padded_vocab, tp);
  }
  if (c.layers % pp != 0) return fmt::format("layers {} is not divisible by pp {}", c.layers, pp);
  if (c.layers % (pp * virtual_stages) != 0) {
    return fmt::format("layers {} is not divisible by pp {} x {} virtual stages", c.layers, pp,
                       virtual_stages);
  }
  return std::nullopt;
}

std::vector<ParameterSpec> gpt_parameter_specs(const GptConfig& c) {
  const std::int64_t h = c.hidden;
  std::vector<ParameterSpec> specs = {
      {"transformer.wte.weight", {c.vocab_rows(), h}, 0, false, 0, c.vocab}};
  if (!c.llama()) specs.push_back({"transformer.wpe.weight", {c.block_size, h}, kReplicated});
  for (std::int64_t layer = 0; layer < c.layers; ++layer) {
    const std::vector<ParameterSpec> block = block_parameter_specs(c, layer);
    specs.insert(specs.end(), block.begin(), block.end());
  }
  specs.push_back({"transformer.ln_f.weight", {h}, kReplicated});
  if (!c.llama()) specs.push_back({"transformer.ln_f.bias", {h}, kReplicated});
  if (!c.tied_embeddings) {
    specs.push_back({kUntiedHead, {c.vocab_rows(), h}, 0, false, 0, c.vocab});
  }
  return specs;
}

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_layer_norm(const std::string& name) {
  return name.find(".ln_") != std::string::npos;
}

// `draw` of the spec's used rows, then its zero padding rows (see ParameterSpec::used_rows).
template <class Draw>
Tensor with_padding(const ParameterSpec& spec, Draw draw) {
  if (spec.used_rows == 0 || spec.used_rows == spec.full_shape[0]) return draw(spec.full_shape);
  Shape used = spec.full_shape;
  used[0] = spec.used_rows;
  return fit_vocab_rows(draw(used), spec.used_rows, spec.full_shape[0]);
}

// A stream per parameter: the seed mixed with the FNV-1a hash of the name.
std::uint64_t stream_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const char ch : name) {
    hash = (hash ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  }
  return seed ^ hash;
}

}  // namespace

MasterInit gpt2_init(std::uint64_t seed, std::int64_t layers, DType dtype, Device device) {
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(layers));
  return [=](const ParameterSpec& spec) {
    const std::string& name = spec.name;
    if (is_layer_norm(name)) {
      return Tensor::full(spec.full_shape, ends_with(name, ".weight") ? 1.0 : 0.0, dtype, device);
    }
    if (ends_with(name, ".bias")) return Tensor::zeros(spec.full_shape, dtype, device);
    const double std = ends_with(name, "c_proj.weight") ? residual_std : 0.02;
    return with_padding(spec, [&](const Shape& shape) {
      return autograd::randn(shape, stream_seed(seed, name), std, dtype, device);
    });
  };
}

MasterInit random_init(std::uint64_t seed, DType dtype, Device device) {
  return [=](const ParameterSpec& spec) {
    const std::string& name = spec.name;
    const std::uint64_t stream = stream_seed(seed, name);
    if (is_layer_norm(name) && ends_with(name, ".weight")) {
      autograd::NoGradGuard no_grad;
      return autograd::add(autograd::randn(spec.full_shape, stream, 0.1, dtype, device),
                           Tensor::full(spec.full_shape, 1.0, dtype, device));
    }
    // Matrices N(0, 1/columns) (LeCun normal), so activations keep their scale at any width.
    const double std =
        spec.full_shape.size() < 2 ? 0.1 : 1.0 / std::sqrt(static_cast<double>(spec.full_shape[1]));
    return with_padding(spec, [&](const Shape& shape) {
      return autograd::randn(shape, stream, std, dtype, device);
    });
  };
}

}  // namespace mpitron::nn
