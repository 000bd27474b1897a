// The weights of a GPT-2 model as other tools' files hold them (llm.c's model file, nanoGPT's
// and Hugging Face's safetensors), under mpitron's canonical parameter names and full shapes:
// the names of gpt_parameter_specs (src/nn/models/gpt_config.h), q, k and v kept apart.
// This folder sits below models/, so the layout is spelled out here; a unit test holds it equal
// to gpt_parameter_specs.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::nn {

/// The sizes of a GPT-2 model that a weight file records (llm.c's header names them maxT, V, Vp,
/// L, NH, C).
struct Gpt2Sizes {
  std::int64_t max_t = 0;         ///< context length: rows of wpe
  std::int64_t vocab = 0;         ///< V, the real tokens (logits past it are never used)
  std::int64_t padded_vocab = 0;  ///< Vp >= V, rows of wte (rows >= V are padding)
  std::int64_t layers = 0;        ///< L, transformer blocks
  std::int64_t heads = 0;         ///< NH, attention heads (a safetensors file does not hold it)
  std::int64_t hidden = 0;        ///< C, the width of the residual stream
};

/// A whole model: its sizes and every parameter as a full float32 CPU tensor under its canonical
/// name (gpt2_weight_layout).
struct Gpt2Weights {
  Gpt2Sizes sizes;
  std::map<std::string, autograd::Tensor> tensors;
  /// The file stored bfloat16 values (llm.c's version 5, or a safetensors file or Hugging Face
  /// folder holding a BF16 tensor), widened to float32 exactly on reading.
  bool stored_bfloat16 = false;
};

/// The canonical names and full shapes in gpt_parameter_specs' order (weights [out, in]):
///   transformer.wte.weight [Vp, C], transformer.wpe.weight [maxT, C], per block i (0 .. L-1)
///   transformer.h.{i}.ln_1.{weight,bias} [C], .attn.{q,k,v}.weight [C, C], .attn.{q,k,v}.bias
///   [C], .attn.c_proj.weight [C, C], .attn.c_proj.bias [C], .ln_2.{weight,bias} [C],
///   .mlp.c_fc.weight [4C, C], .mlp.c_fc.bias [4C], .mlp.c_proj.weight [C, 4C], .mlp.c_proj.bias
///   [C], then transformer.ln_f.{weight,bias} [C].
std::vector<std::pair<std::string, autograd::Shape>> gpt2_weight_layout(const Gpt2Sizes& sizes);

/// The message of the first size rule `sizes` breaks, or "": every size >= 1, V <= Vp, C
/// divisible by NH, and each size fits a 32-bit int (llm.c's header).
std::string gpt2_sizes_error(const Gpt2Sizes& sizes);

/// Checks that `weights.tensors` holds exactly gpt2_weight_layout(weights.sizes) (any dtype and
/// device). Throws std::runtime_error "<context>: <what>" for bad sizes (gpt2_sizes_error), a
/// missing tensor ("missing tensor 'transformer.h.1.attn.v.bias'"), an unexpected one, or one of
/// another shape ("tensor 'transformer.wpe.weight' has shape [16, 16], expected [32, 16]").
void check_gpt2_weights(const Gpt2Weights& weights, const std::string& context);

/// A 64-bit FNV-1a hash of named tensors (offset basis 14695981039346656037, prime
/// 1099511628211), for ranks to prove that they start from the same values (--init-from's
/// Gpt2Weights::tensors, a checkpoint's GptCheckpoint::full): the tensors in name order, each
/// name's bytes one at a time, then its values' bytes 8 at a time as one native-endian word (the
/// last bytes of a size not a multiple of 8 one at a time). The tensors must be on the CPU; a
/// 500 MB model takes a fraction of a second.
std::uint64_t weights_fingerprint(const std::map<std::string, autograd::Tensor>& tensors);

}  // namespace mpitron::nn
