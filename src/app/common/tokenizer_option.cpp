#include "app/common/tokenizer_option.h"

#include <fmt/format.h>

#include <stdexcept>

#include "comm/errors.h"
#include "nn/data/gpt2_tokenizer_files.h"

namespace mpitron::app {

nn::Gpt2Tokenizer load_tokenizer_option(const std::string& path) {
  try {
    nn::Gpt2Tokenizer tokenizer = nn::load_tokenizer(path);
    if (tokenizer.vocab_size() > 65536) {
      throw std::runtime_error(fmt::format("{}: vocabulary of {} does not fit uint16 token ids",
                                           path, tokenizer.vocab_size()));
    }
    return tokenizer;
  } catch (const std::runtime_error& e) {
    throw comm::ConfigError(fmt::format("--tokenizer {}", e.what()));
  }
}

}  // namespace mpitron::app
