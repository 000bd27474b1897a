#include "nn/checkpoint/gpt2_safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {
namespace {

using autograd::Shape;
using autograd::Tensor;

constexpr std::string_view kPrefix = "transformer.";

/// One tensor of a block as the file names it, its shape [out, in] (or [out]) in units of C, and
/// whether Hugging Face's Conv1D stores it transposed.
struct BlockPart {
  const char* name;
  std::int64_t rows;  ///< out, in units of C
  std::int64_t cols;  ///< in, in units of C; 0 for a vector
  bool conv1d;
};

constexpr BlockPart kBlockParts[] = {
    {"ln_1.weight", 1, 0, false},       {"ln_1.bias", 1, 0, false},
    {"attn.c_attn.weight", 3, 1, true}, {"attn.c_attn.bias", 3, 0, false},
    {"attn.c_proj.weight", 1, 1, true}, {"attn.c_proj.bias", 1, 0, false},
    {"ln_2.weight", 1, 0, false},       {"ln_2.bias", 1, 0, false},
    {"mlp.c_fc.weight", 4, 1, true},    {"mlp.c_fc.bias", 4, 0, false},
    {"mlp.c_proj.weight", 1, 4, true},  {"mlp.c_proj.bias", 1, 0, false}};

/// Hugging Face's causal-mask buffers, which hold no weights.
constexpr std::string_view kBuffers[] = {"attn.bias", "attn.masked_bias"};

/// The block index and part of "h.<i>.<part>", or nothing.
std::optional<std::pair<std::int64_t, std::string>> block_name(const std::string& name) {
  if (!name.starts_with("h.")) return std::nullopt;
  std::int64_t index = -1;
  const char* last = name.data() + name.size();
  const auto [end, error] = std::from_chars(name.data() + 2, last, index);
  if (error != std::errc() || index < 0 || end == last || *end != '.') return std::nullopt;
  return std::pair{index, std::string(end + 1, last)};
}

/// The file's tensors by their name without the "transformer." prefix, and what is read.
class GptFile {
 public:
  explicit GptFile(const std::filesystem::path& path) : reader_(path) {
    const auto& entries = reader_.entries();
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::string& name = entries[i].name;
      if (name == "lm_head.weight") continue;
      const std::string key = name.starts_with(kPrefix) ? name.substr(kPrefix.size()) : name;
      const auto block = block_name(key);
      if (block && std::find(std::begin(kBuffers), std::end(kBuffers), block->second) !=
                       std::end(kBuffers)) {
        continue;
      }
      if (const auto [it, added] = index_.emplace(key, i); !added) {
        fail(fmt::format("tensors '{}' and '{}' are the same tensor", entries[it->second].name,
                         name));
      }
    }
  }

  /// Whether a tensor taken so far was stored as BF16.
  bool took_bfloat16() const { return took_bfloat16_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(fmt::format("{}: {}", reader_.path().string(), what));
  }

  /// 1 + the largest block index of the file (0 when it has no block).
  std::int64_t layers() const {
    std::int64_t layers = 0;
    for (const auto& [key, index] : index_) {
      if (const auto block = block_name(key)) layers = std::max(layers, block->first + 1);
    }
    return layers;
  }

  /// The shape of tensor `key`; fails when it is missing.
  const Shape& shape(const std::string& key) const { return entry(key).shape; }

  /// Tensor `key` as float32, which must have shape `shape`.
  Tensor take(const std::string& key, const Shape& shape) {
    const SafetensorsEntry& e = entry(key);
    if (e.shape != shape) {
      fail(fmt::format("tensor '{}' has shape {}, expected {}", e.name,
                       autograd::to_string(e.shape), autograd::to_string(shape)));
    }
    taken_.insert(key);
    took_bfloat16_ |= e.dtype == StoredDType::bf16;
    return reader_.read_float32(e.name);
  }

  /// Fails naming the first tensor never taken.
  void check_all_taken() const {
    for (const auto& [key, index] : index_) {
      if (taken_.count(key) == 0) {
        fail(fmt::format("unexpected tensor '{}'", reader_.entries()[index].name));
      }
    }
  }

  /// lm_head.weight, if the file has one.
  std::optional<Tensor> lm_head() {
    const SafetensorsEntry* e = reader_.find("lm_head.weight");
    if (e == nullptr) return std::nullopt;
    return reader_.read_float32(e->name);
  }

 private:
  const SafetensorsEntry& entry(const std::string& key) const {
    const auto it = index_.find(key);
    if (it == index_.end()) {
      fail(fmt::format("missing tensor '{}' (or '{}{}')", key, kPrefix, key));
    }
    return reader_.entries()[it->second];
  }

  SafetensorsReader reader_;
  std::map<std::string, std::size_t> index_;  // name without the prefix -> entry index
  std::set<std::string> taken_;
  bool took_bfloat16_ = false;
};

}  // namespace

Gpt2Weights read_gpt2_safetensors(const std::filesystem::path& path, std::int64_t heads) {
  GptFile file(path);
  const Shape wte_shape = file.shape("wte.weight");
  if (wte_shape.size() != 2) {
    file.fail(
        fmt::format("wte.weight has shape {}, expected [V, C]", autograd::to_string(wte_shape)));
  }
  const std::int64_t vocab = wte_shape[0], c = wte_shape[1];
  const Shape wpe_shape = file.shape("wpe.weight");
  Gpt2Weights weights;
  weights.sizes = {wpe_shape.empty() ? 0 : wpe_shape[0], vocab, vocab, file.layers(), heads, c};
  if (heads < 1) {
    file.fail("a safetensors file does not record the number of attention heads: give --heads");
  }
  if (const std::string bad = gpt2_sizes_error(weights.sizes); !bad.empty()) file.fail(bad);

  // [3C, C]: nanoGPT's [out, in]; [C, 3C]: Hugging Face's Conv1D [in, out].
  const Shape& c_attn = file.shape("h.0.attn.c_attn.weight");
  const bool conv1d = c_attn == Shape{c, 3 * c};
  if (!conv1d && c_attn != Shape{3 * c, c}) {
    file.fail(
        fmt::format("tensor 'h.0.attn.c_attn.weight' has shape {}, expected [3C, C] = {} "
                    "(nanoGPT) or [C, 3C] = {} (Hugging Face Conv1D)",
                    autograd::to_string(c_attn), autograd::to_string({3 * c, c}),
                    autograd::to_string({c, 3 * c})));
  }

  autograd::NoGradGuard no_grad;
  auto& out = weights.tensors;
  out["transformer.wte.weight"] = file.take("wte.weight", {vocab, c});
  out["transformer.wpe.weight"] = file.take("wpe.weight", {weights.sizes.max_t, c});
  for (std::int64_t layer = 0; layer < weights.sizes.layers; ++layer) {
    const std::string h = fmt::format("h.{}.", layer);
    for (const BlockPart& part : kBlockParts) {
      const std::int64_t rows = part.rows * c, cols = part.cols * c;
      Tensor tensor;
      if (cols == 0) {
        tensor = file.take(h + part.name, {rows});
      } else if (conv1d && part.conv1d) {
        tensor = autograd::transpose(file.take(h + part.name, {cols, rows}), 0, 1);
      } else {
        tensor = file.take(h + part.name, {rows, cols});
      }
      const std::string name = std::string(part.name);
      if (!name.starts_with("attn.c_attn.")) {
        out["transformer." + h + name] = tensor;
        continue;
      }
      const std::string kind = name.substr(std::string_view("attn.c_attn.").size());
      const char* qkv[] = {"q", "k", "v"};
      for (std::int64_t i = 0; i < 3; ++i) {
        out[fmt::format("transformer.{}attn.{}.{}", h, qkv[i], kind)] =
            autograd::narrow(tensor, 0, i * c, c);
      }
    }
  }
  out["transformer.ln_f.weight"] = file.take("ln_f.weight", {c});
  out["transformer.ln_f.bias"] = file.take("ln_f.bias", {c});
  file.check_all_taken();
  weights.stored_bfloat16 = file.took_bfloat16();

  if (const auto lm_head = file.lm_head()) {
    const Tensor& wte = out["transformer.wte.weight"];
    const bool equal =
        lm_head->shape() == wte.shape() &&
        std::memcmp(lm_head->buffer().data(), wte.buffer().data(), wte.buffer().bytes()) == 0;
    if (!equal) {
      file.fail(
          "lm_head.weight differs from wte.weight (mpitron ties the LM head to the token "
          "embedding)");
    }
  }
  return weights;
}

}  // namespace mpitron::nn
