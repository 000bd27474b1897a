#include "app/train/init_from.h"

#include <fmt/format.h>

#include "comm/errors.h"
#include "nn/checkpoint/pretrained.h"

namespace mpitron::app {

nn::Gpt2Weights load_init_from(const TrainOptions& o, nn::GptConfig& config) {
  const auto given = [&o](const char* flag) { return o.model_flags_given.contains(flag); };
  const auto error = [&o](const std::string& what) {
    return comm::ConfigError(fmt::format("--init-from {}: {}", o.init_from, what));
  };
  nn::Gpt2Weights weights;
  try {
    weights = nn::load_pretrained(o.init_from, given("heads") ? o.heads : 0);
  } catch (const std::exception& e) {
    // Most messages start with the file's path already.
    const std::string what = e.what();
    throw what.starts_with(o.init_from) ? comm::ConfigError("--init-from " + what) : error(what);
  }
  nn::Gpt2Sizes& file = weights.sizes;
  if (o.vocab > file.vocab && given("vocab")) {
    throw error(fmt::format(
        "--vocab {} is larger than the file's vocab {} (its wte rows from {} on are padding)",
        o.vocab, file.vocab, file.vocab));
  }
  // A safetensors file records no vocabulary apart from its rows (the export of a padded run
  // holds the padding): a smaller --vocab, given, makes the rows from it on padding.
  if (given("vocab") && o.vocab >= 1 && o.vocab < file.vocab && file.vocab == file.padded_vocab) {
    file.vocab = o.vocab;
  }
  const struct {
    const char* flag;
    std::int64_t option;
    std::int64_t from_file;
    std::int64_t nn::GptConfig::*member;
  } sizes[] = {{"vocab", o.vocab, file.vocab, &nn::GptConfig::vocab},
               {"block-size", o.block_size, file.max_t, &nn::GptConfig::block_size},
               {"layers", o.layers, file.layers, &nn::GptConfig::layers},
               {"hidden", o.hidden, file.hidden, &nn::GptConfig::hidden},
               {"heads", o.heads, file.heads, &nn::GptConfig::heads}};
  for (const auto& size : sizes) {
    if (given(size.flag) && size.option != size.from_file) {
      throw error(fmt::format("the file has {} {}, --{} {}", size.flag, size.from_file, size.flag,
                              size.option));
    }
    config.*size.member = size.from_file;
  }
  if (!given("gelu")) config.gelu = nn::GeluForm::tanh;
  return weights;
}

}  // namespace mpitron::app
