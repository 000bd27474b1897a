#include "nn/models/gpt_names.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"

namespace mpitron::nn {
namespace {

using autograd::Shape;
using autograd::Tensor;

/// The input map, remembering which tensors were taken so that leftovers can be reported.
class Inputs {
 public:
  explicit Inputs(const std::map<std::string, Tensor>& tensors) : tensors_(tensors) {}

  /// Tensor `name`, which must have `shape`.
  const Tensor& take(const std::string& name, const Shape& shape) {
    const auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      throw std::invalid_argument(fmt::format("gpt export: missing tensor '{}'", name));
    }
    if (!it->second.defined() || it->second.shape() != shape) {
      throw std::invalid_argument(fmt::format(
          "gpt export: tensor '{}' has shape {}, expected {}", name,
          it->second.defined() ? autograd::to_string(it->second.shape()) : "(undefined)",
          autograd::to_string(shape)));
    }
    taken_.insert(name);
    return it->second;
  }

  /// Throws "gpt export: unexpected tensor '<name>'" for the first input never taken.
  void check_all_taken() const {
    for (const auto& [name, tensor] : tensors_) {
      if (taken_.count(name) == 0) {
        throw std::invalid_argument(fmt::format("gpt export: unexpected tensor '{}'", name));
      }
    }
  }

 private:
  const std::map<std::string, Tensor>& tensors_;
  std::set<std::string> taken_;
};

/// 1 + the largest i of a name "transformer.h.<i>.*" (0 when there is none).
int layer_count(const std::map<std::string, Tensor>& tensors) {
  const std::string prefix = "transformer.h.";
  int layers = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    int index = -1;
    const char* begin = name.data() + prefix.size();
    const auto [end, error] = std::from_chars(begin, name.data() + name.size(), index);
    if (error != std::errc() || *end != '.' || index < 0) {
      throw std::invalid_argument(fmt::format("gpt export: unexpected tensor '{}'", name));
    }
    layers = std::max(layers, index + 1);
  }
  return layers;
}

}  // namespace

std::vector<NamedTensor> gpt_export_tensors(const std::map<std::string, Tensor>& tensors) {
  const auto wte = tensors.find("transformer.wte.weight");
  if (wte == tensors.end() || !wte->second.defined() || wte->second.ndim() != 2) {
    throw std::invalid_argument("gpt export: missing tensor 'transformer.wte.weight' [V, C]");
  }
  const std::int64_t vocab = wte->second.size(0), c = wte->second.size(1);
  const auto wpe = tensors.find("transformer.wpe.weight");
  const std::int64_t block =
      wpe != tensors.end() && wpe->second.defined() && wpe->second.ndim() == 2 ? wpe->second.size(0)
                                                                               : 0;

  Inputs inputs(tensors);
  std::vector<NamedTensor> out;
  const auto copy = [&](const std::string& name, const Shape& shape) {
    out.push_back({name, inputs.take(name, shape)});
  };
  const auto linear = [&](const std::string& name, std::int64_t out_features,
                          std::int64_t in_features) {
    copy(name + ".weight", {out_features, in_features});
    copy(name + ".bias", {out_features});
  };
  copy("transformer.wte.weight", {vocab, c});
  copy("transformer.wpe.weight", {block, c});
  autograd::NoGradGuard no_grad;
  for (int i = 0, layers = layer_count(tensors); i < layers; ++i) {
    const std::string h = fmt::format("transformer.h.{}.", i);
    copy(h + "ln_1.weight", {c});
    copy(h + "ln_1.bias", {c});
    for (const char* part : {"weight", "bias"}) {
      const bool weight = std::string_view(part) == "weight";
      const Shape shape = weight ? Shape{c, c} : Shape{c};
      std::vector<Tensor> qkv;
      for (const char* which : {"q", "k", "v"}) {
        qkv.push_back(inputs.take(fmt::format("{}attn.{}.{}", h, which, part), shape));
      }
      out.push_back({fmt::format("{}attn.c_attn.{}", h, part), autograd::concat(qkv, 0)});
    }
    linear(h + "attn.c_proj", c, c);
    copy(h + "ln_2.weight", {c});
    copy(h + "ln_2.bias", {c});
    linear(h + "mlp.c_fc", 4 * c, c);
    linear(h + "mlp.c_proj", c, 4 * c);
  }
  copy("transformer.ln_f.weight", {c});
  copy("transformer.ln_f.bias", {c});
  inputs.check_all_taken();
  return out;
}

std::vector<NamedTensor> gpt_hf_export_tensors(const std::map<std::string, Tensor>& tensors,
                                               std::int64_t vocab) {
  std::vector<NamedTensor> out = gpt_export_tensors(tensors);
  const std::string prefix = "transformer.";
  autograd::NoGradGuard no_grad;
  for (NamedTensor& named : out) {
    named.name.erase(0, prefix.size());
    Tensor& tensor = std::get<Tensor>(named.value);
    if (named.name == "wte.weight") {
      if (vocab < 1 || vocab > tensor.size(0)) {
        throw std::invalid_argument(fmt::format(
            "gpt export: vocab {} is not in [1, {}] (the rows of wte)", vocab, tensor.size(0)));
      }
      tensor = autograd::narrow(tensor, 0, 0, vocab);
    }
    const bool conv1d = tensor.ndim() == 2 && named.name.starts_with("h.");
    if (conv1d) tensor = autograd::transpose(tensor, 0, 1);
  }
  return out;
}

}  // namespace mpitron::nn
