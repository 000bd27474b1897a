// Loading a byte-level BPE tokenizer from whatever file or folder holds one: GPT-2's files
// (gpt2_tokenizer_files.h), Llama 3's tiktoken rank file or Hugging Face's tokenizer.json
// (hf_tokenizer_files.h), recognized by content.
#pragma once

#include <string>

#include "nn/data/bpe_tokenizer.h"

namespace mpitron::nn {

/// The tokenizer of `path`, whatever its form: a folder holding tokenizer.json, else
/// encoder.json and vocab.bpe, else gpt2_tokenizer.bin, else tokenizer.model; Hugging Face's
/// tokenizer.json (a JSON object with a "model"); either of encoder.json and vocab.bpe (the other
/// must sit beside it under its usual name); an llm.c gpt2_tokenizer.bin (recognized by its
/// magic); or a tiktoken rank file (lines "base64-bytes rank", Llama 3's tokenizer.model). Files
/// are recognized by content, not name. Throws std::runtime_error, one line naming `path`:
/// "<path>: not a tokenizer (expected GPT-2's encoder.json + vocab.bpe, llm.c's
/// gpt2_tokenizer.bin, a tiktoken rank file such as Llama 3's tokenizer.model, or Hugging Face's
/// tokenizer.json)" for anything else, "<path>: no such file or folder", and the errors of the
/// loaders of each kind.
BpeTokenizer load_tokenizer(const std::string& path);

}  // namespace mpitron::nn
