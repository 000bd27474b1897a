#include "comm/configuration.h"

#include <algorithm>
#include <array>
#include <optional>
#include <vector>

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
    message += std::string(first == 0 ? " " : "; ") + (ranks.size() == 1 ? "rank " : "ranks ");
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      message += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
    }
    message += (ranks.size() == 1 ? " runs \"" : " run \"") + descriptions[first] + "\"";
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
  const std::uint64_t failed = failure ? 1 : 0;
  const std::vector<std::uint64_t> flags =
      gather_values(comm, &failed, MPI_UINT64_T, 1, "configuration check");
  if (failure) throw *failure;
  std::vector<int> rejecting;
  for (std::size_t r = 0; r < flags.size(); ++r) {
    if (flags[r] != 0) rejecting.push_back(comm.global_rank(static_cast<int>(r)));
  }
  if (!rejecting.empty()) {
    std::string ranks;
    for (const int r : rejecting)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    const bool one = rejecting.size() == 1;
    throw ConfigError((one ? "rank " : "ranks ") + ranks + " rejected the configuration (see " +
                      (one ? "its error line)" : "their error lines)"));
  }
  check_same_configuration(comm, description);
  return description;
}

}  // namespace mpitron::comm
