#include "nn/checkpoint/llmc_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>

#include "nn/checkpoint/atomic_file.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {

static_assert(std::endian::native == std::endian::little, "llm.c files are little-endian");

namespace {

using autograd::Shape;
using autograd::Tensor;

using LlmcHeader = std::array<std::int32_t, 256>;

/// The per-layer arrays of the file in their order, each as the canonical block parts that one
/// layer's slice holds, one after the other (qkvw: q, k, v).
const std::vector<std::vector<const char*>> kStackedArrays = {
    {"ln_1.weight"},
    {"ln_1.bias"},
    {"attn.q.weight", "attn.k.weight", "attn.v.weight"},
    {"attn.q.bias", "attn.k.bias", "attn.v.bias"},
    {"attn.c_proj.weight"},
    {"attn.c_proj.bias"},
    {"ln_2.weight"},
    {"ln_2.bias"},
    {"mlp.c_fc.weight"},
    {"mlp.c_fc.bias"},
    {"mlp.c_proj.weight"},
    {"mlp.c_proj.bias"}};

/// Every canonical tensor with its shape in the order its values lie in the file.
std::vector<std::pair<std::string, Shape>> storage_order(const Gpt2Sizes& sizes) {
  std::map<std::string, Shape> shapes;
  for (auto& [name, shape] : gpt2_weight_layout(sizes))
    shapes.emplace(name, shape);
  std::vector<std::pair<std::string, Shape>> order;
  const auto add = [&](const std::string& name) { order.emplace_back(name, shapes.at(name)); };
  add("transformer.wte.weight");
  add("transformer.wpe.weight");
  for (const auto& parts : kStackedArrays) {
    for (std::int64_t layer = 0; layer < sizes.layers; ++layer) {
      for (const char* part : parts)
        add(fmt::format("transformer.h.{}.{}", layer, part));
    }
  }
  add("transformer.ln_f.weight");
  add("transformer.ln_f.bias");
  return order;
}

std::size_t value_bytes(LlmcPrecision precision) {
  return precision == LlmcPrecision::float32 ? 4 : 2;
}

std::uint64_t file_bytes_of(const Gpt2Sizes& sizes, LlmcPrecision precision) {
  std::uint64_t values = 0;
  for (const auto& [name, shape] : gpt2_weight_layout(sizes))
    values += static_cast<std::uint64_t>(autograd::numel_of(shape));
  return sizeof(LlmcHeader) + values * value_bytes(precision);
}

float widen_bfloat16(std::uint16_t value) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16);
}

std::uint16_t round_to_bfloat16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, stay a (quiet) NaN
    return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  }
  const std::uint32_t ties_to_even = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + ties_to_even) >> 16);
}

std::string describe_header(const Gpt2Sizes& s, LlmcPrecision precision) {
  return fmt::format("maxT {}, V {}, L {}, NH {}, C {}, Vp {}, {}", s.max_t, s.vocab, s.layers,
                     s.heads, s.hidden, s.padded_vocab,
                     precision == LlmcPrecision::float32 ? "float32" : "bfloat16");
}

[[noreturn]] void llmc_damaged(const std::filesystem::path& path, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", path.string(), what));
}

/// The values of `tensor` as float32 on the host.
std::vector<float> float32_values(const Tensor& tensor) {
  std::vector<float> values(static_cast<std::size_t>(tensor.numel()));
  if (tensor.device() == autograd::Device::cpu && tensor.dtype() == autograd::DType::f32) {
    std::memcpy(values.data(), tensor.buffer().data(), values.size() * sizeof(float));
    return values;
  }
  const std::vector<double> wide = tensor.to_vector();
  std::copy(wide.begin(), wide.end(), values.begin());
  return values;
}

}  // namespace

Gpt2Weights read_llmc_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) llmc_damaged(path, "cannot open the file");
  std::error_code error;
  const std::uint64_t size = std::filesystem::file_size(path, error);
  if (error) llmc_damaged(path, "cannot read the file size: " + error.message());
  LlmcHeader header{};
  file.read(reinterpret_cast<char*>(header.data()), sizeof(LlmcHeader));
  if (size < 4 || header[0] != kLlmcMagic) {
    llmc_damaged(path, fmt::format("not an llm.c model file (magic {}, expected {})", header[0],
                                   kLlmcMagic));
  }
  if (size < sizeof(LlmcHeader)) {
    llmc_damaged(path, fmt::format("truncated: {} bytes, fewer than the {}-byte header", size,
                                   sizeof(LlmcHeader)));
  }
  const auto precision = static_cast<LlmcPrecision>(header[1]);
  if (precision != LlmcPrecision::float32 && precision != LlmcPrecision::bfloat16) {
    llmc_damaged(
        path, fmt::format("llm.c model version {} is not 3 (float32) or 5 (bfloat16)", header[1]));
  }
  Gpt2Weights weights;
  weights.sizes = {header[2], header[3], header[7], header[4], header[5], header[6]};
  weights.stored_bfloat16 = precision == LlmcPrecision::bfloat16;
  if (const std::string bad = gpt2_sizes_error(weights.sizes); !bad.empty()) {
    llmc_damaged(path, "bad header: " + bad);
  }
  const std::uint64_t expected = file_bytes_of(weights.sizes, precision);
  if (size < expected) {
    llmc_damaged(path, fmt::format("truncated: {} bytes, but its header ({}) needs {}", size,
                                   describe_header(weights.sizes, precision), expected));
  }
  if (size > expected) {
    llmc_damaged(path, fmt::format("{} bytes after the last tensor: {} bytes, but its header ({}) "
                                   "needs {}",
                                   size - expected, size, describe_header(weights.sizes, precision),
                                   expected));
  }
  std::vector<std::uint16_t> narrow;
  for (const auto& [name, shape] : storage_order(weights.sizes)) {
    Tensor tensor = Tensor::empty(shape);
    auto* values = static_cast<float*>(tensor.buffer().data());
    const auto count = static_cast<std::size_t>(tensor.numel());
    if (precision == LlmcPrecision::float32) {
      file.read(reinterpret_cast<char*>(values), static_cast<std::streamsize>(count * 4));
    } else {
      narrow.resize(count);
      file.read(reinterpret_cast<char*>(narrow.data()), static_cast<std::streamsize>(count * 2));
      std::transform(narrow.begin(), narrow.end(), values, widen_bfloat16);
    }
    if (!file) llmc_damaged(path, fmt::format("cannot read tensor '{}'", name));
    weights.tensors.emplace(name, std::move(tensor));
  }
  return weights;
}

void write_llmc_file(const std::filesystem::path& path, const Gpt2Weights& weights,
                     LlmcPrecision precision) {
  check_gpt2_weights(weights, path.string());
  const Gpt2Sizes& s = weights.sizes;
  LlmcHeader header{};
  header[0] = kLlmcMagic;
  header[1] = static_cast<std::int32_t>(precision);
  const std::int64_t sizes[] = {s.max_t, s.vocab, s.layers, s.heads, s.hidden, s.padded_vocab};
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    header[2 + i] = static_cast<std::int32_t>(sizes[i]);
  }

  AtomicFile file(path);
  file.write(header.data(), sizeof(LlmcHeader));
  std::vector<std::uint16_t> narrow;
  for (const auto& [name, shape] : storage_order(s)) {
    const std::vector<float> values = float32_values(weights.tensors.at(name));
    if (precision == LlmcPrecision::float32) {
      file.write(values.data(), values.size() * sizeof(float));
    } else {
      narrow.resize(values.size());
      std::transform(values.begin(), values.end(), narrow.begin(), round_to_bfloat16);
      file.write(narrow.data(), narrow.size() * sizeof(std::uint16_t));
    }
  }
  file.commit();
}

}  // namespace mpitron::nn
