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
  const std::int64_t h = c.hidden, f = 4 * c.hidden;
  const struct {
    const char* name;
    Shape shape;
    int split_dim;
  } block[] = {
      {"ln_1.weight", {h}, kReplicated}, {"ln_1.bias", {h}, kReplicated},
      {"attn.q.weight", {h, h}, 0},      {"attn.q.bias", {h}, 0},
      {"attn.k.weight", {h, h}, 0},      {"attn.k.bias", {h}, 0},
      {"attn.v.weight", {h, h}, 0},      {"attn.v.bias", {h}, 0},
      {"attn.c_proj.weight", {h, h}, 1}, {"attn.c_proj.bias", {h}, kReplicated},
      {"ln_2.weight", {h}, kReplicated}, {"ln_2.bias", {h}, kReplicated},
      {"mlp.c_fc.weight", {f, h}, 0},    {"mlp.c_fc.bias", {f}, 0},
      {"mlp.c_proj.weight", {h, f}, 1},  {"mlp.c_proj.bias", {h}, kReplicated},
  };
  std::vector<ParameterSpec> specs;
  for (const auto& p : block) {
    specs.push_back({block_prefix(layer) + p.name, p.shape, p.split_dim, true, layer});
  }
  return specs;
}

BlockMasters block_masters(const GptConfig& config, std::int64_t layer, const MasterInit& init) {
  std::map<std::string, Tensor> m;
  const std::string prefix = block_prefix(layer);
  for (const ParameterSpec& spec : block_parameter_specs(config, layer)) {
    m[spec.name.substr(prefix.size())] = init(spec);
  }
  const auto norm = [&m](const std::string& name) -> NormWeights {
    return {m.at(name + ".weight"), m.at(name + ".bias")};
  };
  const auto linear = [&m](const std::string& name) -> LinearWeights {
    return {m.at(name + ".weight"), m.at(name + ".bias")};
  };
  return {norm("ln_1"),
          {linear("attn.q"), linear("attn.k"), linear("attn.v"), linear("attn.c_proj")},
          norm("ln_2"),
          {linear("mlp.c_fc"), linear("mlp.c_proj")}};
}

Parameters block_parameters(std::int64_t layer, const Parameters& norm_1,
                            const Parameters& attention, const Parameters& norm_2,
                            const Parameters& mlp) {
  Parameters all;
  const std::string prefix = block_prefix(layer);
  append_part(all, prefix, kNorm1, norm_1);
  append_part(all, prefix, kAttention, attention);
  append_part(all, prefix, kNorm2, norm_2);
  append_part(all, prefix, kMlp, mlp);
  return all;
}

}  // namespace mpitron::nn
