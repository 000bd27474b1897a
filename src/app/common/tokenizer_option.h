// Loading the --tokenizer of `tokenize`, `eval` and `generate` inside a start-up agreement.
#pragma once

#include <string>

#include "nn/data/bpe_tokenizer.h"

namespace mpitron::app {

/// The tokenizer of --tokenizer `path` (nn::load_tokenizer: GPT-2's files, a tiktoken rank file
/// such as Llama 3's, Hugging Face's tokenizer.json, or a folder of one). Throws
/// comm::ConfigError, one line starting "--tokenizer <path>", for a file of another kind, a
/// malformed tokenizer or a missing path.
nn::BpeTokenizer load_tokenizer_option(const std::string& path);

}  // namespace mpitron::app
