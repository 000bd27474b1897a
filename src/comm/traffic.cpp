#include "comm/traffic.h"

#include <mutex>

namespace mpitron::comm {

namespace {

std::mutex g_mutex;
Traffic g_traffic;

}  // namespace

void count_traffic(const Communicator& comm, std::size_t bytes) {
  if (comm.size() < 2) return;
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_traffic[comm.name()] += bytes;
}

Traffic traffic() {
  const std::lock_guard<std::mutex> lock(g_mutex);
  return g_traffic;
}

Traffic traffic_since(const Traffic& before, const Traffic& after) {
  Traffic delta;
  for (const auto& [name, bytes] : after) {
    const auto it = before.find(name);
    delta[name] = bytes - (it == before.end() ? 0 : it->second);
  }
  return delta;
}

}  // namespace mpitron::comm
