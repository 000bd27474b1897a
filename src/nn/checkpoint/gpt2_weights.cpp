#include "nn/checkpoint/gpt2_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace mpitron::nn {

std::vector<std::pair<std::string, autograd::Shape>> gpt2_weight_layout(const Gpt2Sizes& s) {
  const std::int64_t c = s.hidden, f = 4 * s.hidden;
  std::vector<std::pair<std::string, autograd::Shape>> layout = {
      {"transformer.wte.weight", {s.padded_vocab, c}}, {"transformer.wpe.weight", {s.max_t, c}}};
  const std::pair<const char*, autograd::Shape> block[] = {
      {"ln_1.weight", {c}},        {"ln_1.bias", {c}},        {"attn.q.weight", {c, c}},
      {"attn.q.bias", {c}},        {"attn.k.weight", {c, c}}, {"attn.k.bias", {c}},
      {"attn.v.weight", {c, c}},   {"attn.v.bias", {c}},      {"attn.c_proj.weight", {c, c}},
      {"attn.c_proj.bias", {c}},   {"ln_2.weight", {c}},      {"ln_2.bias", {c}},
      {"mlp.c_fc.weight", {f, c}}, {"mlp.c_fc.bias", {f}},    {"mlp.c_proj.weight", {c, f}},
      {"mlp.c_proj.bias", {c}}};
  for (std::int64_t layer = 0; layer < s.layers; ++layer) {
    for (const auto& [name, shape] : block) {
      layout.emplace_back(fmt::format("transformer.h.{}.{}", layer, name), shape);
    }
  }
  layout.emplace_back("transformer.ln_f.weight", autograd::Shape{c});
  layout.emplace_back("transformer.ln_f.bias", autograd::Shape{c});
  return layout;
}

std::string gpt2_sizes_error(const Gpt2Sizes& s) {
  const std::pair<const char*, std::int64_t> sizes[] = {{"maxT", s.max_t}, {"V", s.vocab},
                                                        {"L", s.layers},   {"NH", s.heads},
                                                        {"C", s.hidden},   {"Vp", s.padded_vocab}};
  for (const auto& [name, value] : sizes) {
    if (value < 1 || value > std::numeric_limits<std::int32_t>::max()) {
      return fmt::format("size {} is {}, not in [1, 2^31)", name, value);
    }
  }
  if (s.padded_vocab < s.vocab) {
    return fmt::format("padded vocab Vp {} is smaller than vocab V {}", s.padded_vocab, s.vocab);
  }
  if (s.hidden % s.heads != 0) {
    return fmt::format("hidden C {} is not divisible by heads NH {}", s.hidden, s.heads);
  }
  return "";
}

void check_gpt2_weights(const Gpt2Weights& weights, const std::string& context) {
  if (const std::string error = gpt2_sizes_error(weights.sizes); !error.empty()) {
    throw std::runtime_error(fmt::format("{}: {}", context, error));
  }
  const auto layout = gpt2_weight_layout(weights.sizes);
  for (const auto& [name, shape] : layout) {
    const auto it = weights.tensors.find(name);
    if (it == weights.tensors.end() || !it->second.defined()) {
      throw std::runtime_error(fmt::format("{}: missing tensor '{}'", context, name));
    }
    if (it->second.shape() != shape) {
      throw std::runtime_error(fmt::format("{}: tensor '{}' has shape {}, expected {}", context,
                                           name, autograd::to_string(it->second.shape()),
                                           autograd::to_string(shape)));
    }
  }
  if (weights.tensors.size() != layout.size()) {
    for (const auto& [name, tensor] : weights.tensors) {
      const bool known = std::any_of(layout.begin(), layout.end(),
                                     [&](const auto& entry) { return entry.first == name; });
      if (!known)
        throw std::runtime_error(fmt::format("{}: unexpected tensor '{}'", context, name));
    }
  }
}

std::uint64_t weights_fingerprint(const std::map<std::string, autograd::Tensor>& tensors) {
  constexpr std::uint64_t kPrime = 1099511628211ULL;
  std::uint64_t hash = 14695981039346656037ULL;
  for (const auto& [name, tensor] : tensors) {  // a std::map: name order
    for (const char c : name)
      hash = (hash ^ static_cast<unsigned char>(c)) * kPrime;
    const kernels::Buffer& buffer = tensor.buffer();
    const auto* bytes = static_cast<const unsigned char*>(buffer.data());
    const std::size_t size = buffer.bytes();
    std::size_t at = 0;
    for (; at + sizeof(std::uint64_t) <= size; at += sizeof(std::uint64_t)) {
      std::uint64_t word = 0;
      std::memcpy(&word, bytes + at, sizeof(word));
      hash = (hash ^ word) * kPrime;
    }
    for (; at < size; ++at)
      hash = (hash ^ bytes[at]) * kPrime;
  }
  return hash;
}

}  // namespace mpitron::nn
