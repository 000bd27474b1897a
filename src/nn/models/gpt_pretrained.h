// Between a GPT's sizes and parameters (GptConfig, full tensors under canonical names) and the
// GPT-2 weight files of other tools (Gpt2Weights of src/nn/checkpoint/: llm.c, nanoGPT, Hugging
// Face).
#pragma once

#include <map>
#include <string>

#include "nn/checkpoint/gpt2_weights.h"
#include "nn/models/gpt_config.h"

namespace mpitron::nn {

/// The weights of a model of sizes `config` whose full parameters are `full` (canonical names,
/// e.g. a loaded checkpoint's): maxT = block_size, V = vocab, Vp = the rows of
/// transformer.wte.weight, L, NH, C from `config`. The tensors are shared, not copied; they are
/// checked when written (check_gpt2_weights). Throws std::invalid_argument when `full` has no
/// two-dimensional transformer.wte.weight.
Gpt2Weights gpt2_weights_of(const GptConfig& config, const std::map<std::string, Tensor>& full);

/// A MasterInit that returns the full tensors of `weights` (which must outlive it), in `dtype`
/// on `device`; the token embedding refitted to the spec's rows (fit_vocab_rows: its V =
/// weights.sizes.vocab vocabulary rows, then zero padding), so a file padded to one Vp starts a
/// model padded to another. Throws std::invalid_argument naming a parameter `weights` lacks or
/// holds in another shape.
MasterInit pretrained_init(const Gpt2Weights& weights, DType dtype, Device device);

}  // namespace mpitron::nn
