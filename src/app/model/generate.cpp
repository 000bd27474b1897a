#include "app/model/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

#include "app/common/context_parallel_options.h"
#include "app/common/help.h"
#include "app/common/options.h"
#include "app/common/tokenizer_option.h"
#include "app/model/checkpoint_loading.h"
#include "autograd/weight_operands.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "kernels/ops.h"
#include "nn/models/generate.h"
#include "nn/parameter.h"

namespace mpitron::app {

CLI::App& add_generate_command(CLI::App& app, GenerateOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "generate", "Sample text from a trained checkpoint or another tool's weights (--init-from)");
  add_common_options(c, o.common);
  add_context_parallel_options(c, o.common);
  add_model_source_options(c, o.model);
  c.add_option("--prompt", o.prompt, "Text to continue")->required();
  c.add_option("--tokenizer", o.tokenizer,
               "Tokenizer file or folder (GPT-2's, Llama 3's tokenizer.model, a tokenizer.json; "
               "BOS and stop tokens from it); else bytes");
  c.add_option("--tokens", o.tokens,
               fmt::format("Tokens to generate (at most {})", kMaxGenerateTokens))
      ->capture_default_str();
  c.add_option("--temperature", o.temperature, "Sampling temperature (0: greedy)")
      ->capture_default_str();
  add_size_option(c, "--top-k", o.top_k, "Sample among the k most likely tokens (0: all)");
  add_switch(c, "--bf16", o.bf16,
             "Compute as train --bf16 does: the weights rounded to bfloat16, bfloat16 GEMMs and "
             "TP transfers");
  add_example(c, "mpitron generate --load ckpt --prompt \"The GNU General\" --tokens 200");
  return c;
}

namespace {

// One message per offending option, naming it and its value.
void check_sampling_options(const GenerateOptions& o) {
  if (o.tokens < 0 || o.tokens > kMaxGenerateTokens) {
    throw comm::ConfigError(
        fmt::format("--tokens must be in [0, {}], got {}", kMaxGenerateTokens, o.tokens));
  }
  if (o.top_k < 0) throw comm::ConfigError(fmt::format("--top-k must be >= 0, got {}", o.top_k));
  if (!(o.temperature >= 0.0) || !std::isfinite(o.temperature)) {
    throw comm::ConfigError(
        fmt::format("--temperature must be a finite number >= 0, got {}", o.temperature));
  }
}

// The tokenizer of --tokenizer, checked against the model's vocabulary `vocab`; none
// (bytes) without the flag.
std::optional<nn::BpeTokenizer> prompt_tokenizer(const GenerateOptions& o, std::int64_t vocab) {
  if (o.tokenizer.empty()) {
    if (vocab > 256) {
      throw comm::ConfigError(fmt::format(
          "the model's vocab {} is not bytes: give the --tokenizer it was trained with", vocab));
    }
    return std::nullopt;
  }
  nn::BpeTokenizer tokenizer = load_tokenizer_option(o.tokenizer);
  if (tokenizer.vocab_size() > vocab) {
    throw comm::ConfigError(fmt::format("--tokenizer {} has {} ids, more than the model's vocab {}",
                                        o.tokenizer, tokenizer.vocab_size(), vocab));
  }
  return tokenizer;
}

}  // namespace

int run_generate(const GenerateOptions& o, comm::Communicator world) {
  std::optional<nn::BpeTokenizer> tokenizer;
  LoadedRun run = load_model_agreed(
      "generate", o.common, o.model, world,
      [&](const nn::GptConfig& config, const ParallelSizes& sizes) {
        if (sizes.pp != 1) {
          throw comm::ConfigError("generate runs the whole model on one stage: --pp must be 1");
        }
        if (sizes.cp != 1) {
          throw comm::ConfigError(
              "generate decodes one token at a time and does not split sequences: --cp must be 1");
        }
        if (o.prompt.empty()) throw comm::ConfigError("--prompt must not be empty");
        check_sampling_options(o);
        tokenizer = prompt_tokenizer(o, config.vocab);
        for (const char ch : tokenizer ? std::string() : o.prompt) {
          if (static_cast<unsigned char>(ch) >= config.vocab) {
            throw comm::ConfigError(
                fmt::format("--prompt holds byte {}, outside the model's vocab {}",
                            static_cast<unsigned char>(ch), config.vocab));
          }
        }
        return fmt::format(
            "tokens={} temperature={} top_k={} seed={} bf16={} tokenizer={} prompt=\"{}\"",
            o.tokens, o.temperature, o.top_k, o.common.seed, o.bf16,
            tokenizer ? tokenizer->vocab_size() : 0, o.prompt);
      });
  warn_if_trained_with_bf16(run, o.bf16, "generate", world);
  const comm::ParallelTopology topology(world, run.sizes.tp, 1, run.sizes.dp);
  const nn::GptStage stage(run.config, model_init(run, autograd::DType::f32), topology);
  // --bf16: train --bf16's parameters (its masters, here the loaded weights, rounded) and GEMM
  // operands, which also make the TP collectives carry bfloat16.
  if (o.bf16) {
    nn::round_parameters_to_bf16(stage.parameters());
    nn::refuse_infinite_bf16_parameters(stage.parameters(), world);
  }
  const kernels::GemmOperandsScope operands(o.bf16 ? kernels::GemmOperands::bfloat16
                                                   : kernels::GemmOperands::float32);
  const autograd::Bf16WeightScope weight_copies;  // each token's forward reads the same copies
  std::vector<std::int64_t> prompt;
  nn::SamplingOptions sampling{
      o.temperature, o.top_k, o.common.seed, tokenizer ? tokenizer->vocab_size() : 0, {}};
  if (tokenizer) {
    if (tokenizer->prompt_starts_with_document_start())
      prompt.push_back(tokenizer->document_start());
    for (const std::int32_t id : tokenizer->encode(o.prompt))
      prompt.push_back(id);
    for (const std::int32_t id : tokenizer->stop_ids())
      sampling.stop_ids.push_back(id);
  } else {
    for (const char ch : o.prompt)
      prompt.push_back(static_cast<unsigned char>(ch));
  }
  std::vector<std::int64_t> ids;
  try {
    ids = nn::generate(stage, topology.tp_comm(), prompt, o.tokens, sampling);
  } catch (const nn::NonFiniteLogits& error) {  // thrown on every rank at the same step
    run.log->error("error: generate: {}: {}: the model's values overflow float32 on this prompt",
                   run.label, error.what());
    return 1;
  }
  if (world.rank() == 0) {
    std::string text;
    if (tokenizer) {
      // The text without the BOS and the stop token that ended it (the JSON keeps every id).
      const bool stopped = ids.size() > prompt.size() &&
                           std::find(sampling.stop_ids.begin(), sampling.stop_ids.end(),
                                     ids.back()) != sampling.stop_ids.end();
      const auto begin = ids.begin() + (tokenizer->prompt_starts_with_document_start() ? 1 : 0);
      const std::vector<std::int32_t> narrow(begin, stopped ? ids.end() - 1 : ids.end());
      text = tokenizer->decode(narrow);
    } else {
      for (const std::int64_t id : ids)
        text.push_back(static_cast<char>(id));
    }
    std::cout << text << std::endl;
    // The ids as numbers: a sample need not be valid UTF-8, which JSON text must be.
    if (!o.common.json.empty()) {
      const std::string unit = tokenizer ? "tokens" : "bytes";
      nlohmann::json report = {
          {"prompt_" + unit, prompt.size()}, {tokenizer ? "ids" : "bytes", ids},
          {"temperature", o.temperature},    {"top_k", o.top_k},
          {"seed", o.common.seed},           {"bf16", o.bf16}};
      if (run.pretrained) {
        report["init_from"] = o.model.init_from;
      } else {
        report["load"] = o.model.load;
        report["step"] = run.checkpoint.step;
      }
      write_json(o.common.json, report);
    }
  }
  return 0;
}

}  // namespace mpitron::app
