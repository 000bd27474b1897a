#include "nn/checkpoint/pretrained.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "nn/checkpoint/gpt2_safetensors.h"
#include "nn/checkpoint/llmc_file.h"
#include "nn/checkpoint/safetensors.h"

namespace mpitron::nn {

Gpt2Weights load_pretrained(const std::filesystem::path& path, std::int64_t heads_if_needed) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw CheckpointError(fmt::format("{}: cannot open the file", path.string()));
  char start[9] = {};
  file.read(start, sizeof(start));
  const auto got = static_cast<std::uint64_t>(file.gcount());
  std::int32_t magic = 0;
  std::memcpy(&magic, start, sizeof(magic));
  if (got >= sizeof(magic) && magic == kLlmcMagic) return read_llmc_file(path);

  std::uint64_t header_length = 0;
  std::memcpy(&header_length, start, sizeof(header_length));
  std::error_code error;
  const std::uint64_t size = std::filesystem::file_size(path, error);
  const bool safetensors = !error && got == sizeof(start) && start[8] == '{' &&
                           header_length <= size - sizeof(header_length);
  if (safetensors) return read_gpt2_safetensors(path, heads_if_needed);
  throw CheckpointError(
      fmt::format("{}: not an llm.c model file (magic {}, expected {}) or a safetensors file",
                  path.string(), magic, kLlmcMagic));
}

}  // namespace mpitron::nn
