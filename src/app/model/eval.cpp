#include "app/model/eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "app/common/context_parallel_options.h"
#include "app/common/help.h"
#include "app/common/options.h"
#include "app/common/tokenizer_option.h"
#include "app/model/checkpoint_loading.h"
#include "comm/errors.h"
#include "comm/topology.h"
#include "kernels/ops.h"
#include "nn/train/gpt_trainer.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_eval_command(CLI::App& app, EvalOptions& o) {
  CLI::App& c = *app.add_subcommand(
      "eval",
      "Mean cross-entropy of a checkpoint or --init-from weights over a text file or llm.c token "
      "shards");
  add_common_options(c, o.common);
  add_context_parallel_options(c, o.common);
  add_model_source_options(c, o.model);
  c.add_option("--data", o.data, "Text file (as bytes), or llm.c token shards: file, folder, glob")
      ->required();
  c.add_option("--tokenizer", o.tokenizer,
               "Tokenizer file or folder (GPT-2's, Llama 3's tokenizer.model, a tokenizer.json): "
               "--data is text to encode");
  c.add_option("--seq", o.seq, "Window length (default: the model's block size)")
      ->check(size_at_most_max());
  c.add_option("--split", o.split,
               "Tokens to score: all, or train's split: train (a text's first 90 %, the train "
               "shards) or val (the rest, the val shards: train's val_loss windows)")
      ->check(CLI::IsMember({"all", "train", "val"}))
      ->capture_default_str();
  add_switch(c, "--bf16", o.bf16,
             "Compute as train --bf16 does: the weights rounded to bfloat16, bfloat16 GEMMs and "
             "TP/PP transfers (a bf16 run's checkpoint then gives its val_loss)");
  add_example(
      c, "mpirun -np 2 mpitron eval --tp 2 --load ckpt --data /usr/share/common-licenses/GPL-3");
  return c;
}

namespace {

// --data's tokens: bytes, shards, or with --tokenizer the text encoded.
nn::TokenCorpus read_corpus(const EvalOptions& o, std::int64_t vocab) {
  if (o.tokenizer.empty()) {
    try {
      return nn::TokenCorpus::from_data(o.data, vocab, nn::ValShardsAlone::taken);
    } catch (const std::exception& e) {
      throw comm::ConfigError(e.what());
    }
  }
  nn::BpeTokenizer tokenizer = load_tokenizer_option(o.tokenizer);
  if (tokenizer.vocab_size() > vocab) {
    throw comm::ConfigError(fmt::format("--tokenizer {} has {} ids, more than the model's vocab {}",
                                        o.tokenizer, tokenizer.vocab_size(), vocab));
  }
  if (nn::names_token_shards(o.data)) {
    throw comm::ConfigError(fmt::format(
        "--data {} is llm.c token shards, already tokens: --tokenizer encodes a text file",
        o.data));
  }
  try {
    return nn::TokenCorpus::from_text(o.data, tokenizer);
  } catch (const std::exception& e) {
    throw comm::ConfigError(e.what());
  }
}

// The tokens --split names: [begin, end) of the corpus.
struct TokenRange {
  std::size_t begin, end;
};
TokenRange split_range(const nn::TokenCorpus& corpus, const std::string& split) {
  if (split == "train") return {0, corpus.split()};
  if (split == "val") return {corpus.split(), corpus.tokens().size()};
  return {0, corpus.tokens().size()};
}

}  // namespace

int run_eval(const EvalOptions& o, comm::Communicator world) {
  std::optional<nn::TokenCorpus> corpus;
  std::int64_t seq = 0;
  LoadedRun run = load_model_agreed(
      "eval", o.common, o.model, world,
      [&](const nn::GptConfig& config, const ParallelSizes& sizes) {
        seq = o.seq.value_or(config.block_size);
        if (seq < 1 || seq > config.block_size) {
          throw comm::ConfigError(fmt::format(
              "--seq must be in [1, {}] (the model's block size), got {}", config.block_size, seq));
        }
        check_context_parallel_sequence(seq, sizes, /*sequence_parallel=*/false,
                                        o.seq ? "--seq" : "the window (the model's block size)");
        corpus = read_corpus(o, config.vocab);
        const TokenRange range = split_range(*corpus, o.split);
        if (static_cast<std::int64_t>(range.end - range.begin) < seq + 1) {
          throw comm::ConfigError(fmt::format(
              "{}: {}{}, shorter than one window of seq + 1 = {}", o.data,
              o.split == "all" ? "" : fmt::format("its {} split holds ", o.split),
              nn::counted(static_cast<std::int64_t>(range.end - range.begin), corpus->unit()),
              seq + 1));
        }
        // A model read with --init-from may have fewer ids than the data's bytes.
        const std::uint32_t top =
            *std::max_element(corpus->tokens().begin(), corpus->tokens().end());
        if (top >= config.vocab) {
          throw comm::ConfigError(fmt::format("--data {} holds {} {}, outside the model's vocab {}",
                                              o.data, corpus->unit(), top, config.vocab));
        }
        return fmt::format("seq={} split={} bf16={} data_tokens={} data_fnv={:016x}", seq, o.split,
                           o.bf16, corpus->tokens().size(), corpus->fingerprint());
      });
  if (std::string_view(corpus->unit()) == "byte" && run.config.vocab > 256) {
    // A byte-level model may have a larger vocabulary (train --vocab), so this only warns.
    run.log->warn(
        "warning: --data {} is read as bytes, but the model's vocab is {}: if it was trained "
        "on tokens, give the --tokenizer it was trained with, or its token shards",
        o.data, run.config.vocab);
  }
  warn_if_trained_with_bf16(run, o.bf16, "eval", world);
  const comm::ParallelTopology topology(world, run.sizes.tp, run.sizes.pp, run.sizes.dp,
                                        run.sizes.cp);
  // --bf16: train --bf16's trainer (the parameters rounded from the loaded weights, which it
  // keeps as float32 masters) under its GEMM operands, which also make the TP collectives and
  // the pipeline sends carry bfloat16: the same code as that run's validation.
  const kernels::GemmOperandsScope operands(o.bf16 ? kernels::GemmOperands::bfloat16
                                                   : kernels::GemmOperands::float32);
  nn::GptTrainOptions options;
  options.device = run.device;
  options.cp_comm = cp_comm_of(o.common);
  options.bf16 = o.bf16;
  nn::GptTrainer model(run.config, model_init(run, options.dtype), topology, options);
  std::vector<nn::TokenBatch> windows;
  const TokenRange range = split_range(*corpus, o.split);
  const auto first = static_cast<std::int64_t>(range.begin);
  const auto length = static_cast<std::int64_t>(range.end - range.begin);
  for (const std::int64_t start :
       nn::evaluation_starts(length, seq, 0, run.sizes.dp, topology.dp_rank())) {
    windows.push_back(nn::make_token_batch(corpus->tokens(), {first + start}, seq, run.device));
  }
  const double loss = model.evaluate(windows);
  if (!std::isfinite(loss)) {  // the same on every rank
    run.log->error(
        "error: eval: the loss of {} on {} is {}: the model's values overflow float32 on this "
        "data",
        run.label, o.data, nn::value_text(loss));
    return 1;
  }
  const std::int64_t count = (length - 1) / seq;
  const std::string unit = corpus->unit();
  run.log->info("eval: {} on {}{} ({} of {}{}): loss {:.6f} nats per {}, {:.6f} bits per {}",
                run.label, o.data, o.split == "all" ? "" : fmt::format(", {} split", o.split),
                nn::counted(count, "window"), nn::counted(seq, unit),
                o.bf16 ? ", bf16: bfloat16 parameters and GEMMs" : "", loss, unit,
                loss / std::log(2.0), unit);
  if (!o.common.json.empty() && world.rank() == 0) {
    nlohmann::json report = {{"loss", loss},     {"bits_per_" + unit, loss / std::log(2.0)},
                             {"windows", count}, {"seq", seq},
                             {"split", o.split}, {"bf16", o.bf16},
                             {"data", o.data}};
    if (run.pretrained) {
      report["init_from"] = o.model.init_from;
    } else {
      report["step"] = run.checkpoint.step;
    }
    write_json(o.common.json, report);
  }
  return 0;
}

}  // namespace mpitron::app
