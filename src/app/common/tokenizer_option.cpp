#include "app/common/tokenizer_option.h"

#include <fmt/format.h>

#include <stdexcept>

#include "comm/errors.h"
#include "nn/data/tokenizer_files.h"

namespace mpitron::app {

nn::BpeTokenizer load_tokenizer_option(const std::string& path) {
  try {
    return nn::load_tokenizer(path);
  } catch (const std::runtime_error& e) {
    throw comm::ConfigError(fmt::format("--tokenizer {}", e.what()));
  }
}

}  // namespace mpitron::app
