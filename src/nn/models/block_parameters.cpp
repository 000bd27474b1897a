#include "nn/models/block_parameters.h"

#include <fmt/format.h>

#include <map>
#include <string>

namespace mpitron::nn {

namespace {

// The parts of a block: each named inside the block, its layers' names for their parameters
// ("out" for the attention's output projection) renamed to the block's.
struct Part {
  const char* name;
  std::map<std::string, std::string> renames;
};
const Part kNorm1{"ln_1", {}};
const Part kAttention{"attn", {{"out", "c_proj"}}};
const Part kNorm2{"ln_2", {}};
const Part kMlp{"mlp", {{"fc1", "c_fc"}, {"fc2", "c_proj"}}};
const Part kSwiGlu{"mlp", {{"fc1", "up"}, {"fc2", "c_proj"}}};

std::string block_prefix(std::int64_t layer) {
  return fmt::format("transformer.h.{}.", layer);
}

// Appends `parameters` of `part` to `into`, each named prefix + part + its renamed name.
void append_part(Parameters& into, const std::string& prefix, const Part& part,
                 Parameters parameters) {
  for (Parameter& p : parameters) {
    const std::size_t dot = p.name.find('.');
    const auto it = part.renames.find(p.name.substr(0, dot));
    if (it != part.renames.end()) p.name = it->second + p.name.substr(dot);
  }
  append_parameters(into, prefix + part.name, parameters);
}

}  // namespace

std::vector<ParameterSpec> block_parameter_specs(const GptConfig& c, std::int64_t layer) {
  const std::int64_t h = c.hidden, f = c.ffn_size();
  const std::int64_t kv = c.kv_head_count() * (c.hidden / c.heads);
  const struct {
    const char* name;
    Shape shape;
    int split_dim;
  } gpt2[] =
      {
          {"ln_1.weight", {h}, kReplicated}, {"ln_1.bias", {h}, kReplicated},
          {"attn.q.weight", {h, h}, 0},      {"attn.q.bias", {h}, 0},
          {"attn.k.weight", {h, h}, 0},      {"attn.k.bias", {h}, 0},
          {"attn.v.weight", {h, h}, 0},      {"attn.v.bias", {h}, 0},
          {"attn.c_proj.weight", {h, h}, 1}, {"attn.c_proj.bias", {h}, kReplicated},
          {"ln_2.weight", {h}, kReplicated}, {"ln_2.bias", {h}, kReplicated},
          {"mlp.c_fc.weight", {f, h}, 0},    {"mlp.c_fc.bias", {f}, 0},
          {"mlp.c_proj.weight", {h, f}, 1},  {"mlp.c_proj.bias", {h}, kReplicated},
      },
    llama[] = {
        {"ln_1.weight", {h}, kReplicated}, {"attn.q.weight", {h, h}, 0},
        {"attn.k.weight", {kv, h}, 0},     {"attn.v.weight", {kv, h}, 0},
        {"attn.c_proj.weight", {h, h}, 1}, {"ln_2.weight", {h}, kReplicated},
        {"mlp.gate.weight", {f, h}, 0},    {"mlp.up.weight", {f, h}, 0},
        {"mlp.c_proj.weight", {h, f}, 1},
    };
  std::vector<ParameterSpec> specs;
  const auto add = [&](const auto& block) {
    for (const auto& p : block) {
      specs.push_back({block_prefix(layer) + p.name, p.shape, p.split_dim, true, layer});
    }
  };
  if (c.llama()) {
    add(llama);
  } else {
    add(gpt2);
  }
  return specs;
}

BlockMasters block_masters(const GptConfig& config, std::int64_t layer, const MasterInit& init) {
  std::map<std::string, Tensor> m;
  const std::string prefix = block_prefix(layer);
  for (const ParameterSpec& spec : block_parameter_specs(config, layer)) {
    m[spec.name.substr(prefix.size())] = init(spec);
  }
  // A part's tensor, or an undefined one where the family has none (llama's biases, GPT-2's
  // gate).
  const auto get = [&m](const std::string& name) {
    const auto it = m.find(name);
    return it == m.end() ? Tensor() : it->second;
  };
  const auto norm = [&get](const std::string& name) -> NormWeights {
    return {get(name + ".weight"), get(name + ".bias")};
  };
  const auto linear = [&get](const std::string& name) -> LinearWeights {
    return {get(name + ".weight"), get(name + ".bias")};
  };
  return {
      norm("ln_1"),
      {linear("attn.q"), linear("attn.k"), linear("attn.v"), linear("attn.c_proj")},
      norm("ln_2"),
      {linear(config.llama() ? "mlp.up" : "mlp.c_fc"), linear("mlp.c_proj"), linear("mlp.gate")}};
}

Parameters block_parameters(const GptConfig& config, std::int64_t layer, const Parameters& norm_1,
                            const Parameters& attention, const Parameters& norm_2,
                            const Parameters& mlp) {
  Parameters all;
  const std::string prefix = block_prefix(layer);
  append_part(all, prefix, kNorm1, norm_1);
  append_part(all, prefix, kAttention, attention);
  append_part(all, prefix, kNorm2, norm_2);
  append_part(all, prefix, config.llama() ? kSwiGlu : kMlp, mlp);
  return all;
}

}  // namespace mpitron::nn
