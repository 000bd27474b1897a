#include "nn/checkpoint/pretrained.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include "nn/checkpoint/gpt2_safetensors.h"
#include "nn/checkpoint/llmc_file.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {

namespace {

// `weights`, after a check that every value is finite: a NaN or an infinity in another tool's
// file would only show as a NaN loss at the first step. Throws CheckpointError "<path>: tensor
// <name> holds 3 non-finite values (NaN or infinite) of 768" for the first such tensor in
// the file's layout.
Gpt2Weights finite(Gpt2Weights weights, const std::filesystem::path& path) {
  for (const auto& [name, shape] : gpt2_weight_layout(weights.sizes)) {
    const auto it = weights.tensors.find(name);
    if (it == weights.tensors.end()) continue;
    const std::vector<double> values = it->second.to_vector();
    const auto bad =
        std::count_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
    if (bad > 0) {
      throw CheckpointError(
          fmt::format("{}: tensor {} holds {} non-finite values (NaN or "
                      "infinite) of {}",
                      path.string(), name, bad, values.size()));
    }
  }
  return weights;
}

}  // namespace

Gpt2Weights load_pretrained(const std::filesystem::path& path, std::int64_t heads_if_needed) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw CheckpointError(fmt::format("{}: cannot open the file", path.string()));
  char start[9] = {};
  file.read(start, sizeof(start));
  const auto got = static_cast<std::uint64_t>(file.gcount());
  if (got == 0) {
    throw CheckpointError(fmt::format(
        "{}: empty file (0 bytes), not an llm.c model file or a safetensors file", path.string()));
  }
  std::int32_t magic = 0;
  std::memcpy(&magic, start, sizeof(magic));
  if (got >= sizeof(magic) && magic == kLlmcMagic) return finite(read_llmc_file(path), path);

  std::uint64_t header_length = 0;
  std::memcpy(&header_length, start, sizeof(header_length));
  std::error_code error;
  const std::uint64_t size = std::filesystem::file_size(path, error);
  const bool json_header = !error && got == sizeof(start) && start[8] == '{';
  if (json_header && header_length <= size - sizeof(header_length)) {
    return finite(read_gpt2_safetensors(path, heads_if_needed), path);
  }
  if (json_header && header_length < (std::uint64_t{1} << 32)) {  // a plausible header, cut short
    throw CheckpointError(fmt::format(
        "{}: truncated safetensors file: its header is {} bytes, the file holds {} after the "
        "8-byte length",
        path.string(), header_length, size - sizeof(header_length)));
  }
  throw CheckpointError(
      fmt::format("{}: not an llm.c model file (magic {}, expected {}) or a safetensors file",
                  path.string(), magic, kLlmcMagic));
}

}  // namespace mpitron::nn
