// Pretrained GPT-2 weights from another tool's file, whichever format it is in.
#pragma once

#include <cstdint>
#include <filesystem>

#include "nn/checkpoint/gpt2_weights.h"

namespace mpitron::nn {

/// Reads the GPT-2 weights of `path`, an llm.c model file (its first int32 is kLlmcMagic:
/// read_llmc_file, which takes NH from the header and ignores `heads_if_needed`) or a
/// safetensors file (its first 8 bytes are a header length that fits the file and the header
/// starts with '{': read_gpt2_safetensors with NH = `heads_if_needed`). Throws CheckpointError
/// "<path>: not an llm.c model file (magic 1234, expected 20240326) or a safetensors file" for
/// a file that is neither ("<path>: empty file (0 bytes), ..." for an empty one), "<path>:
/// truncated safetensors file: its header is 3072 bytes, the file holds 992 after the 8-byte
/// length" for one whose header starts with '{' but is cut short (a length below 2^32), the
/// reader's one-line CheckpointError for a damaged one, and
/// "<path>: tensor <name> holds 3 non-finite values (NaN or infinite) of 768" for the first
/// tensor (in gpt2_weight_layout's order) that holds a NaN or an infinity.
Gpt2Weights load_pretrained(const std::filesystem::path& path, std::int64_t heads_if_needed);

}  // namespace mpitron::nn
