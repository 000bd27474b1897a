#include "comm/configuration.h"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "comm/agreement.h"
#include "comm/errors.h"
#include "comm/wait.h"

namespace mpitron::comm {

std::uint64_t fnv1a_64(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

namespace {

// How much of a description is shown around its first difference from the first rank's.
constexpr std::size_t kShownBefore = 40, kShownAfter = 120;

// All ranks' `count` values starting at `mine`, gathered through the deadline routine.
template <class T>
std::vector<T> gather_values(const Communicator& comm, const T* mine, MPI_Datatype type, int count,
                             std::string_view what) {
  std::vector<T> values(static_cast<std::size_t>(comm.size()) * static_cast<std::size_t>(count));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(mine, count, type, values.data(), count, type, comm.native(), &request),
            "MPI_Iallgather");
  wait_one(comm, request, {what, -1, values.size() * sizeof(T)});
  return values;
}

// Every rank's whole description (lengths first, then MPI_Iallgatherv).
std::vector<std::string> gather_descriptions(const Communicator& comm,
                                             const std::string& description) {
  const int length = static_cast<int>(description.size());
  const std::vector<int> lengths = gather_values(comm, &length, MPI_INT, 1, "configuration check");
  std::vector<int> offsets(lengths.size(), 0);
  for (std::size_t r = 1; r < lengths.size(); ++r)
    offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::vector<char> all(static_cast<std::size_t>(offsets.back() + lengths.back()));
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgatherv(description.data(), length, MPI_CHAR, all.data(), lengths.data(),
                            offsets.data(), MPI_CHAR, comm.native(), &request),
            "MPI_Iallgatherv");
  wait_one(comm, request, {"configuration check", -1, all.size()});
  std::vector<std::string> descriptions;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    descriptions.emplace_back(all.data() + offsets[r], static_cast<std::size_t>(lengths[r]));
  return descriptions;
}

// `text` from a little before its first difference from `reference` ("..." marks a cut).
std::string around_difference(const std::string& text, const std::string& reference) {
  const std::size_t n = std::min(text.size(), reference.size());
  std::size_t first = 0;
  while (first < n && text[first] == reference[first])
    ++first;
  const std::size_t begin = first > kShownBefore ? first - kShownBefore : 0;
  const std::size_t end = std::min(text.size(), first + kShownAfter);
  return (begin > 0 ? "..." : "") + text.substr(begin, end - begin) +
         (end < text.size() ? "..." : "");
}

}  // namespace

void check_same_configuration(const Communicator& comm, const std::string& description) {
  const std::uint64_t hash = fnv1a_64(description);
  const std::vector<std::uint64_t> hashes =
      gather_values(comm, &hash, MPI_UINT64_T, 1, "configuration check");
  if (std::all_of(hashes.begin(), hashes.end(), [&](auto h) { return h == hashes[0]; })) return;
  const std::vector<std::string> descriptions = gather_descriptions(comm, description);
  const auto first_other = static_cast<std::size_t>(
      std::find_if(hashes.begin(), hashes.end(), [&](auto h) { return h != hashes[0]; }) -
      hashes.begin());
  std::string message = "configuration differs between ranks:";
  std::vector<bool> listed(hashes.size(), false);
  for (std::size_t first = 0; first < hashes.size(); ++first) {
    if (listed[first]) continue;
    std::vector<int> ranks;
    for (std::size_t r = first; r < hashes.size(); ++r) {
      if (hashes[r] != hashes[first]) continue;
      listed[r] = true;
      ranks.push_back(comm.global_rank(static_cast<int>(r)));
    }
    // Rank 0's group is shown where it differs from the first other group, the rest where they
    // differ from rank 0.
    const std::string& other = descriptions[first == 0 ? first_other : 0];
    message += (first == 0 ? " " : "; ") + ranks_phrase(ranks) +
               (ranks.size() == 1 ? " runs \"" : " run \"") +
               around_difference(descriptions[first], other) + "\"";
  }
  throw ConfigError(message);
}

std::string agree_on_configuration(const Communicator& comm,
                                   const std::function<std::string()>& local_setup) {
  std::string description;
  std::optional<ConfigError> failure;
  try {
    description = local_setup();
  } catch (const ConfigError& e) {
    failure = e;
  }
  const std::vector<int> rejecting = ranks_where(comm, failure.has_value());
  if (failure) throw *failure;
  if (!rejecting.empty()) {
    throw ConfigError(ranks_phrase(rejecting) + " rejected the configuration (see " +
                      (rejecting.size() == 1 ? "its error line)" : "their error lines)"));
  }
  check_same_configuration(comm, description);
  return description;
}

}  // namespace mpitron::comm
