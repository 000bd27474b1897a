#include "app/common/context_parallel_options.h"

#include <fmt/format.h>

#include <algorithm>

#include "app/common/help.h"
#include "comm/errors.h"

namespace mpitron::app {

void add_context_parallel_options(CLI::App& command, CommonOptions& options) {
  command
      .add_option("--cp", options.cp,
                  "Context-parallel degree: each sequence split over cp ranks in zigzag chunks "
                  "(default 1)")
      ->check(integer_in(1, kMaxSize))
      ->group(kCommonGroup);
  command
      .add_option("--cp-comm", options.cp_comm,
                  "How context-parallel ranks exchange keys and values: ring (overlapped "
                  "send/receive) or all-gather")
      ->check(CLI::IsMember({"ring", "all-gather"}))
      ->capture_default_str()
      ->group(kCommonGroup);
}

nn::CpComm cp_comm_of(const CommonOptions& options) {
  return nn::parse_cp_comm(options.cp_comm).value_or(nn::CpComm::ring);
}

void check_context_parallel_sequence(std::int64_t seq, const ParallelSizes& sizes,
                                     bool sequence_parallel, const std::string& seq_name) {
  if (sizes.cp == 1) return;
  if (seq % (2 * sizes.cp) != 0) {
    const std::int64_t chunks = 2 * sizes.cp;
    const std::int64_t fitting = std::max(seq / chunks, std::int64_t{1}) * chunks;  // e.g.
    throw comm::ConfigError(
        fmt::format("{} {} does not split into 2*cp = {} equal zigzag chunks (--cp {}): --seq "
                    "{} would",
                    seq_name, seq, chunks, sizes.cp, fitting));
  }
  if (sequence_parallel && (seq / sizes.cp) % sizes.tp != 0) {
    throw comm::ConfigError(fmt::format(
        "--sequence-parallel needs --seq / cp = {} divisible by tp {}", seq / sizes.cp, sizes.tp));
  }
}

}  // namespace mpitron::app
