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

constexpr std::size_t kShownCharacters = 200;

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

// Every rank's description, cut to kShownCharacters.
std::vector<std::string> gather_descriptions(const Communicator& comm,
                                             const std::string& description) {
  std::array<char, kShownCharacters> shown{};
  std::copy_n(description.begin(), std::min(description.size(), shown.size()), shown.begin());
  const std::vector<char> all =
      gather_values(comm, shown.data(), MPI_CHAR, kShownCharacters, "configuration check");
  std::vector<std::string> descriptions;
  for (std::size_t r = 0; r < static_cast<std::size_t>(comm.size()); ++r) {
    const char* begin = all.data() + r * kShownCharacters;
    descriptions.emplace_back(begin, std::find(begin, begin + kShownCharacters, '\0'));
  }
  return descriptions;
}

}  // namespace

void check_same_configuration(const Communicator& comm, const std::string& description) {
  const std::uint64_t hash = fnv1a_64(description);
  const std::vector<std::uint64_t> hashes =
      gather_values(comm, &hash, MPI_UINT64_T, 1, "configuration check");
  if (std::all_of(hashes.begin(), hashes.end(), [&](auto h) { return h == hashes[0]; })) return;
  const std::vector<std::string> descriptions = gather_descriptions(comm, description);
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
    message += (first == 0 ? " " : "; ") + ranks_phrase(ranks) +
               (ranks.size() == 1 ? " runs \"" : " run \"") + descriptions[first] + "\"";
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
