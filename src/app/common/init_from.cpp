#include "app/common/init_from.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "comm/errors.h"
#include "nn/checkpoint/hf_llama.h"
#include "nn/checkpoint/pretrained.h"
#include "nn/models/gpt_pretrained.h"

namespace mpitron::app {

namespace {

// A model flag of `o` and its value as the user gave it: "--vocab 49152", or "--model
// smollm-135m's vocab 49152" where the preset filled it in.
template <class T>
std::string given_text(const InitFromFlags& o, const char* flag, const T& value) {
  if (o.model.empty() || o.typed.contains(flag)) return fmt::format("--{} {}", flag, value);
  return fmt::format("--model {}'s {} {}", o.model, flag, value);
}

// --init-from a Hugging Face Llama folder: every size and choice from its config.json.
nn::Gpt2Weights load_hf_llama(const InitFromFlags& o, nn::GptConfig& config) {
  const auto error = [&o](const std::string& what) {
    return comm::ConfigError(fmt::format("--init-from {}: {}", o.init_from, what));
  };
  nn::HfLlamaWeights weights;
  try {
    weights = nn::read_hf_llama(o.init_from);
  } catch (const std::exception& e) {
    throw error(e.what());
  }
  const nn::GptConfig file = nn::gpt_config_of(weights.config);
  const struct {
    const char* flag;
    std::int64_t option;
    std::int64_t from_file;
  } sizes[] = {{"vocab", o.vocab, file.vocab},
               {"layers", o.layers, file.layers},
               {"hidden", o.hidden, file.hidden},
               {"heads", o.heads, file.heads},
               {"kv-heads", o.kv_heads, file.kv_head_count()},
               {"ffn-hidden", o.ffn_hidden, file.ffn_size()}};
  for (const auto& size : sizes) {
    if (o.given(size.flag) && size.option != size.from_file) {
      throw error(fmt::format("config.json has {} {}, {}", size.flag, size.from_file,
                              given_text(o, size.flag, size.option)));
    }
  }
  const struct {
    const char* flag;
    double option;
    double from_file;
  } choices[] = {{"rope-theta", o.rope_theta, file.rope_theta},
                 {"norm-eps", o.norm_eps, file.norm_eps}};
  for (const auto& choice : choices) {
    if (o.given(choice.flag) && choice.option != choice.from_file) {
      throw error(fmt::format("config.json has {} {}, {}", choice.flag, choice.from_file,
                              given_text(o, choice.flag, choice.option)));
    }
  }
  if (o.given("untie-embeddings") && o.untie_embeddings == file.tied_embeddings) {
    throw error(fmt::format("config.json has tie_word_embeddings {}, {}", file.tied_embeddings,
                            given_text(o, "untie-embeddings", o.untie_embeddings)));
  }
  // The model has no position table: a shorter --block-size only limits the sequences.
  const std::int64_t block_size = o.block_size > 0 ? o.block_size : o.seq;
  if (o.given("block-size") && block_size > file.block_size) {
    throw error(fmt::format("{} is longer than max_position_embeddings {}",
                            given_text(o, "block-size", block_size), file.block_size));
  }
  config = file;
  config.block_size = o.given("block-size") ? block_size : file.block_size;
  return nn::pretrained_weights_of(weights);
}

}  // namespace

nn::Gpt2Weights load_init_from(const InitFromFlags& o, nn::GptConfig& config) {
  std::error_code missing;
  if (!std::filesystem::exists(o.init_from, missing)) {
    throw comm::ConfigError(fmt::format("--init-from {}: no such file or folder", o.init_from));
  }
  if (nn::is_hf_llama_path(o.init_from)) return load_hf_llama(o, config);
  const auto error = [&o](const std::string& what) {
    return comm::ConfigError(fmt::format("--init-from {}: {}", o.init_from, what));
  };
  nn::Gpt2Weights weights;
  try {
    weights = nn::load_pretrained(o.init_from, o.given("heads") ? o.heads : 0);
  } catch (const std::exception& e) {
    // Most messages start with the file's path already.
    const std::string what = e.what();
    throw what.starts_with(o.init_from) ? comm::ConfigError("--init-from " + what) : error(what);
  }
  nn::Gpt2Sizes& file = weights.sizes;
  if (o.vocab > file.vocab && o.given("vocab")) {
    throw error(
        fmt::format("{} is larger than the file's vocab {} (its wte rows from {} on are padding)",
                    given_text(o, "vocab", o.vocab), file.vocab, file.vocab));
  }
  // A safetensors file records no vocabulary apart from its rows (the export of a padded run
  // holds the padding): a smaller --vocab, given, makes the rows from it on padding.
  if (o.given("vocab") && o.vocab >= 1 && o.vocab < file.vocab && file.vocab == file.padded_vocab) {
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
    if (o.given(size.flag) && size.option != size.from_file) {
      throw error(fmt::format("the file has {} {}, {}", size.flag, size.from_file,
                              given_text(o, size.flag, size.option)));
    }
    config.*size.member = size.from_file;
  }
  if (!o.given("gelu")) config.gelu = nn::GeluForm::tanh;
  return weights;
}

}  // namespace mpitron::app
