// The shape of `mpitron ... --help`: one screen per command. A subcommand's help lists its own
// flags in full, the flags every subcommand shares by name only (group kCommonGroup; `mpitron
// --help` describes them), and ends with one example.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

namespace mpitron::app {

/// The option group of the flags every subcommand shares (options.h).
inline constexpr const char* kCommonGroup = "Common flags (mpitron --help describes them)";

/// CLI11's formatter, except that the kCommonGroup group is one wrapped list of flag names.
/// Set it on the top-level command before adding subcommands (they inherit it).
std::shared_ptr<CLI::Formatter> help_formatter();

/// The description of every common flag, as `mpitron --help` prints it below the subcommands.
std::string common_flags_help();

/// Ends `command`'s help with "Example:" and `example` (one command line).
void add_example(CLI::App& command, const std::string& example);

}  // namespace mpitron::app
