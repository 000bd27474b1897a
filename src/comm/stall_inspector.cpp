#include "comm/stall_inspector.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <list>
#include <thread>

#include "comm/agreement.h"

namespace mpitron::comm {

namespace {

constexpr int kQueryTag = 1;
constexpr int kAnswerTag = 2;
constexpr std::size_t kMaxAnswer = 256;
constexpr std::string_view kNoAnswerReasons =
    "computing, stuck outside mpitron's communication waits, or gone";

MPI_Comm g_side = MPI_COMM_NULL;

// Sends in flight (answers and queries), kept with their buffers until MPI has taken them.
struct PendingSend {
  std::string text;
  MPI_Request request = MPI_REQUEST_NULL;
};
std::list<PendingSend> g_pending;

void send(int rank, int tag, std::string_view text) {
  PendingSend& send = g_pending.emplace_back();
  send.text = std::string(text.substr(0, kMaxAnswer));
  MPI_Isend(send.text.data(), static_cast<int>(send.text.size()), MPI_CHAR, rank, tag, g_side,
            &send.request);
}

void drop_completed_sends() {
  for (auto it = g_pending.begin(); it != g_pending.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? g_pending.erase(it) : std::next(it);
  }
}

// Receives one waiting message of `tag`, if any: its source and text.
std::optional<std::pair<int, std::string>> receive(int tag) {
  int arrived = 0;
  MPI_Status status;
  MPI_Iprobe(MPI_ANY_SOURCE, tag, g_side, &arrived, &status);
  if (!arrived) return std::nullopt;
  int length = 0;
  MPI_Get_count(&status, MPI_CHAR, &length);
  std::array<char, kMaxAnswer> text{};
  MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, tag, g_side, MPI_STATUS_IGNORE);
  return std::make_pair(status.MPI_SOURCE,
                        std::string(text.data(), static_cast<std::size_t>(length)));
}

}  // namespace

void set_stall_inspection_comm(MPI_Comm side) {
  g_side = side;
  if (side == MPI_COMM_NULL) g_pending.clear();
}

void answer_stall_queries(const std::function<std::string()>& doing) {
  if (g_side == MPI_COMM_NULL) return;
  while (const auto query = receive(kQueryTag))
    send(query->first, kAnswerTag, doing());
  drop_completed_sends();
}

std::vector<std::optional<std::string>> inspect_peers(const std::vector<int>& peers,
                                                      double grace_seconds,
                                                      std::string_view doing) {
  std::vector<std::optional<std::string>> answers(peers.size());
  if (g_side == MPI_COMM_NULL) return answers;
  for (const int peer : peers)
    send(peer, kQueryTag, "");
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_seconds);
  std::size_t missing = peers.size();
  while (missing > 0 && std::chrono::steady_clock::now() < end) {
    answer_stall_queries([&] { return std::string(doing); });
    while (const auto answer = receive(kAnswerTag)) {
      for (std::size_t i = 0; i < peers.size(); ++i) {
        if (peers[i] == answer->first && !answers[i]) {
          answers[i] = answer->second;
          --missing;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return answers;
}

void keep_answering(double seconds, std::string_view doing) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    answer_stall_queries([&] { return std::string(doing); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string stall_summary(int self, const std::vector<int>& peers,
                          const std::vector<std::optional<std::string>>& answers,
                          std::string_view doing, bool collective) {
  if (!collective) {
    if (peers.empty()) return "";
    const std::string rank = "rank " + std::to_string(peers[0]);
    return answers[0] ? rank + " is waiting in " + *answers[0]
                      : rank + " did not answer (" + std::string(kNoAnswerReasons) + ")";
  }
  std::vector<int> arrived{self};
  std::string absent;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (answers[i] && *answers[i] == doing) {
      arrived.push_back(peers[i]);
      continue;
    }
    absent +=
        (absent.empty() ? "rank " : ", rank ") + std::to_string(peers[i]) + " (" +
        (answers[i] ? "waiting in " + *answers[i] : "no answer: " + std::string(kNoAnswerReasons)) +
        ")";
  }
  std::sort(arrived.begin(), arrived.end());
  // Every rank inside the call and it still did not complete: one of them stopped progressing.
  return "arrived: " + ranks_phrase(arrived) + "; not arrived: " +
         (absent.empty() ? "none (every rank is inside it: one stopped progressing, e.g. a "
                           "stopped or starved process, or the network failed)"
                         : absent);
}

}  // namespace mpitron::comm
