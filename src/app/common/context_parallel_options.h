// The context-parallel flags (--cp, --cp-comm) of the subcommands that run a GPT step (train,
// validate, bench step, eval; generate takes them to refuse cp > 1), and the rule they add to
// the sequence length. docs/context-parallel.md describes the axis.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "app/common/options.h"
#include "nn/layers/context_parallel_attention.h"

namespace mpitron::app {

/// Registers --cp (the context-parallel degree, default 1) and --cp-comm (ring or all-gather,
/// default ring) on `command`, in the common flags' group (`mpitron --help` describes them). An
/// unknown --cp-comm fails parsing with CLI11's one line.
void add_context_parallel_options(CLI::App& command, CommonOptions& options);

/// The nn::CpComm that --cp-comm names (checked by the parser).
nn::CpComm cp_comm_of(const CommonOptions& options);

/// The sequence rules of context parallelism for sequences of `seq` tokens at `sizes`: at
/// cp > 1, seq divisible by 2 cp ("--seq 10 does not split into 2*cp = 4 equal zigzag chunks
/// (--cp 2): --seq 8 would", the largest multiple of 2 cp not above seq, or 2 cp) and, with
/// `sequence_parallel`, each rank's seq / cp tokens divisible by tp
/// ("--sequence-parallel needs --seq / cp = 6 divisible by tp 4"). `seq_name` is how the message
/// names the length ("--seq 10", or e.g. eval's "the model's block size 30" when no --seq was
/// given). Throws comm::ConfigError.
void check_context_parallel_sequence(std::int64_t seq, const ParallelSizes& sizes,
                                     bool sequence_parallel, const std::string& seq_name = "--seq");

}  // namespace mpitron::app
