// Loading the --tokenizer of `tokenize`, `eval` and `generate` inside a start-up agreement.
#pragma once

#include <string>

#include "nn/data/gpt2_tokenizer.h"

namespace mpitron::app {

/// The tokenizer of --tokenizer `path` (nn::load_tokenizer). Throws comm::ConfigError, one line
/// starting "--tokenizer <path>", for a file that is not a GPT-2 tokenizer, a missing path, or a
/// vocabulary of more than 65536 ids (llm.c's shards and mpitron's corpora hold uint16 ids).
nn::Gpt2Tokenizer load_tokenizer_option(const std::string& path);

}  // namespace mpitron::app
