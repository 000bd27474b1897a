// Start-up agreement: every rank must run the same configuration.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "comm/communicator.h"

namespace mpitron::comm {

/// 64-bit FNV-1a hash of `text` (offset basis 14695981039346656037, prime 1099511628211; Fowler,
/// Noll and Vo, http://www.isthe.com/chongo/tech/comp/fnv/).
std::uint64_t fnv1a_64(std::string_view text);

/// Collective over `comm`: checks that every rank passes the same `description` (e.g. the
/// parallel sizes, model sizes, seed and program version as text) by all-gathering its hash.
/// When they differ, the descriptions themselves are gathered and every rank throws the same
/// ConfigError, e.g. "configuration differs between ranks: ranks 0, 1, 3 run \"tp=2 ...\"; rank
/// 2 runs \"tp=4 ...\"" (world ranks; each description shown up to 200 characters).
void check_same_configuration(const Communicator& comm, const std::string& description);

/// The start-up agreement, meant as a program's first collective: runs `local_setup` (this
/// rank's option checks, without any communication; it returns the configuration description
/// or throws ConfigError), then agrees over `comm` within the deadline. When the setup threw on
/// some ranks, every rank throws ConfigError — those ranks with their own message, the others
/// with "rank(s) R rejected the configuration (see their error lines)" — so options that are bad
/// on only some ranks (e.g. different arguments per rank) end the job instead of leaving ranks
/// waiting in a later collective. Otherwise it is check_same_configuration of the descriptions.
/// Returns the description.
std::string agree_on_configuration(const Communicator& comm,
                                   const std::function<std::string()>& local_setup);

}  // namespace mpitron::comm
