// `mpitron tokenize`: text files to llm.c token shards with a byte-level BPE tokenizer (GPT-2's,
// Llama 3's, a tokenizer.json; docs/data.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/common/options.h"

namespace mpitron::app {

struct TokenizeOptions {
  CommonOptions common;
  std::string tokenizer;
  std::vector<std::string> inputs;
  std::string output;
  /// The shards' name prefix; empty: the first input's file name without its extension.
  std::string name;
  /// The share of the tokens, from the start, written as val shards: 0 <= F < 1.
  double val_fraction = 0.1;
  /// The most tokens in one shard (llm.c's fineweb shards hold 10^8).
  std::int64_t shard_tokens = 100'000'000;
  std::string progress = "auto";
};

/// Adds the `tokenize` subcommand and its flags (--tokenizer --input --output --name
/// --val-fraction --shard-tokens --progress and the common ones except --tp --pp --dp) to `app`.
CLI::App& add_tokenize_command(CLI::App& app, TokenizeOptions& options);

/// Encodes each --input file as one document preceded by the tokenizer's document start (GPT-2's
/// end-of-text 50256, Llama 3's <|begin_of_text|> 128000, as llm.c's data scripts do) and writes
/// the token stream, in input order, as llm.c shards (uint16 ids, or uint32 ids with magic
/// 20240801 for a vocabulary beyond 65536 ids) into --output
/// (created if missing): its first floor(val_fraction * tokens) tokens as
/// "<name>_val_000000.bin", ... and the rest as "<name>_train_000000.bin", ..., each shard of at
/// most --shard-tokens tokens; shards of that name left by an earlier run and not rewritten are
/// removed. World rank 0 does the work (the other ranks only check the options) and prints one
/// summary line (files, bytes, tokens, shards, MB/s of encoding), a progress line while encoding
/// 16 MiB or more (or as --progress forces), and with --json writes the summary as JSON.
/// Throws comm::ConfigError (agreed, exit code 2) for a missing or unreadable input, a tokenizer
/// that does not load, a --val-fraction outside [0, 1) or an --output that is not a writable
/// folder; std::runtime_error when a shard cannot be written.
int run_tokenize(const TokenizeOptions& options, comm::Communicator world);

}  // namespace mpitron::app
