#include "comm/placement.h"

#include <sched.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <sstream>

#include "kernels/device.h"

namespace mpitron::comm {

Placement this_placement(const Communicator& world) {
  Placement p;
  std::array<char, 256> host{};
  p.host = gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "?";
  p.pid = static_cast<long>(getpid());
  p.world_rank = world.world_rank();
  p.node = world.node();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) p.cpus.push_back(cpu);
    }
  }
  p.current_cpu = sched_getcpu();
  p.visible_gpus = kernels::cuda_device_count();
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) p.cuda_visible = visible;
  return p;
}

std::string cpu_ranges(const std::vector<int>& cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (j > i) {
      text += '-';  // appended apart: GCC 12 warns (-Wrestrict) on "-" + std::to_string(...)
      text += std::to_string(cpus[j]);
    }
    i = j + 1;
  }
  return text;
}

std::string placement_text(const Placement& p) {
  std::ostringstream line;
  line << "host " << p.host << ", pid " << p.pid << ", world rank " << p.world_rank
       << ", local rank " << p.node.rank << " of " << p.node.size << ", CPUs "
       << (p.cpus.empty() ? "?" : cpu_ranges(p.cpus));
  if (p.current_cpu >= 0) line << " (on " << p.current_cpu << ")";
  line << ", GPU: ";
  if (p.visible_gpus == 0) {
    line << "none visible";
  } else {
    line << "CUDA device 0 of " << p.visible_gpus << " visible";
  }
  if (!p.cuda_visible.empty()) line << " (CUDA_VISIBLE_DEVICES=" << p.cuda_visible << ")";
  return line.str();
}

}  // namespace mpitron::comm
