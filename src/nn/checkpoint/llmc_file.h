// llm.c's GPT-2 model file (the layout gpt2_build_from_checkpoint of llm.c's train_gpt2.c
// reads, e.g. gpt2_124M.bin), read into and written from mpitron's canonical full tensors.
//
// Layout (little-endian):
//   header   256 int32: magic 20240326, version (3: float32 weights, 5: bfloat16 weights), maxT,
//            V, L, NH, C, Vp, then zeros;
//   weights  float32 (version 3) or bfloat16 (version 5) values, row-major, no gaps, in the
//            order wte [Vp, C], wpe [maxT, C], ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C],
//            qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C], ln2w [L, C], ln2b [L, C],
//            fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C].
// Weights are [out, in] as mpitron's. Each stacked array holds layer 0's slice, then layer 1's,
// ...; a layer's qkvw slice [3C, C] is its q rows, then k, then v (qkvb likewise). wte keeps
// its Vp rows; llm.c writes rows V .. Vp-1 as zeros and never reads logits past V.
#pragma once

#include <cstdint>
#include <filesystem>

#include "nn/checkpoint/gpt2_weights.h"

namespace mpitron::nn {

/// The first int32 of an llm.c model file.
inline constexpr std::int32_t kLlmcMagic = 20240326;

/// How an llm.c model file stores its weights: its header's version.
enum class LlmcPrecision : std::int32_t { float32 = 3, bfloat16 = 5 };

/// Reads an llm.c model file: the header's sizes and every weight as a float32 CPU tensor under
/// its canonical name (gpt2_weight_layout; q, k, v split out of qkvw and qkvb, each layer's
/// tensors sliced out of the stacked arrays, wte [Vp, C] as stored). bfloat16 values widen
/// exactly. Throws CheckpointError "<path>: <what>" when the file cannot be opened, its magic or
/// version is wrong, its sizes break gpt2_sizes_error, or its byte count is not the one its
/// header implies (1024 + 4 or 2 bytes per value), naming both counts ("truncated" or "bytes
/// after the last tensor").
Gpt2Weights read_llmc_file(const std::filesystem::path& path);

/// Writes `weights` (checked with check_gpt2_weights; any dtype and device, stored as
/// `precision`) as an llm.c model file of the layout above, atomically (AtomicFile). bfloat16
/// rounds each float32 value to nearest, ties to even. Reading a file and writing what was read
/// gives the same bytes. Throws std::runtime_error "<path>: <what>" for bad sizes, a missing,
/// unexpected or misshapen tensor, or when the file cannot be written.
void write_llmc_file(const std::filesystem::path& path, const Gpt2Weights& weights,
                     LlmcPrecision precision = LlmcPrecision::float32);

}  // namespace mpitron::nn
