// Runs before libc and libstdc++ are initialised (from openmp_wait.cpp's .preinit_array entry):
// no allocation, no locale, no exceptions here.
#include "kernels/cpu/openmp_wait_rule.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace mpitron::kernels {
namespace {

// A whole positive decimal number that is all of `text`, or std::nullopt.
std::optional<std::int64_t> positive(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

std::optional<std::int64_t> positive(const char* text) {
  return text == nullptr ? std::nullopt : positive(std::string_view(text));
}

}  // namespace

std::optional<std::int64_t> slurm_tasks_on_node(std::string_view tasks_per_node,
                                                std::int64_t node_id) {
  if (node_id < 0) return std::nullopt;
  std::int64_t first_node = 0;  // of the current item
  while (!tasks_per_node.empty()) {
    const std::size_t comma = tasks_per_node.find(',');
    std::string_view item = tasks_per_node.substr(0, comma);
    tasks_per_node =
        comma == std::string_view::npos ? std::string_view() : tasks_per_node.substr(comma + 1);
    std::optional<std::int64_t> nodes = 1;
    const std::size_t open = item.find("(x");
    if (open != std::string_view::npos) {
      if (!item.ends_with(')')) return std::nullopt;
      nodes = positive(item.substr(open + 2, item.size() - open - 3));
      item = item.substr(0, open);
    }
    const std::optional<std::int64_t> tasks = positive(item);
    if (!tasks || !nodes) return std::nullopt;
    if (node_id < first_node + *nodes) return tasks;
    first_node += *nodes;
  }
  return std::nullopt;
}

std::int64_t ranks_on_this_host(const char* ompi_local_size, const char* hydra_local_ranks,
                                const char* slurm_tasks_per_node, const char* slurm_node_id) {
  if (const auto ranks = positive(ompi_local_size)) return *ranks;
  if (const auto ranks = positive(hydra_local_ranks)) return *ranks;
  if (slurm_tasks_per_node != nullptr && slurm_node_id != nullptr) {
    std::int64_t node = -1;
    const std::string_view id(slurm_node_id);
    const auto [end, status] = std::from_chars(id.data(), id.data() + id.size(), node);
    if (status == std::errc() && end == id.data() + id.size()) {
      if (const auto ranks = slurm_tasks_on_node(slurm_tasks_per_node, node)) return *ranks;
    }
  }
  return 1;
}

std::optional<std::int64_t> cpu_list_count(std::string_view list) {
  if (list.ends_with('\n')) list.remove_suffix(1);
  if (list.empty()) return std::nullopt;
  std::int64_t count = 0;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const std::size_t dash = item.find('-');
    std::int64_t first = 0, last = 0;
    const auto parse = [](std::string_view text, std::int64_t& value) {
      const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
      return status == std::errc() && end == text.data() + text.size() && value >= 0;
    };
    if (!parse(item.substr(0, dash), first)) return std::nullopt;
    last = first;
    if (dash != std::string_view::npos && !parse(item.substr(dash + 1), last)) return std::nullopt;
    if (last < first) return std::nullopt;
    count += last - first + 1;
  }
  return count;
}

bool threads_have_own_cores(std::int64_t threads, std::int64_t ranks_here,
                            std::int64_t cpus_in_mask, std::int64_t cpus_for_job) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 24;  // no overflow below
  threads = std::clamp<std::int64_t>(threads, 1, kLimit);
  ranks_here = std::clamp<std::int64_t>(ranks_here, 1, kLimit);
  return threads <= cpus_in_mask && ranks_here * threads <= cpus_for_job;
}

std::int64_t spin_count(double microseconds, double nanoseconds_per_spin) {
  if (!(nanoseconds_per_spin > 0.0)) return 1;
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(microseconds * 1e3 / nanoseconds_per_spin)));
}

std::optional<std::string> cpu_mask_warning_text(std::int64_t threads, std::int64_t cpus_in_mask,
                                                 std::int64_t cpus_for_job) {
  if (threads <= 1 || threads <= cpus_in_mask) return std::nullopt;
  const std::string count = std::to_string(cpus_in_mask) + (cpus_in_mask == 1 ? " CPU" : " CPUs");
  const std::string start = std::to_string(threads) + " threads per rank, but ";
  if (cpus_in_mask >= cpus_for_job) {
    return start + "only " + count + (cpus_in_mask == 1 ? " is" : " are") +
           " available here, so its threads take turns: run at most " +
           std::to_string(cpus_in_mask) + " threads per rank (--threads)";
  }
  return start + "this rank is bound to " + count +
         ", so its threads take turns: bind each rank to as many cores as threads (mpirun "
         "--map-by slot:PE=" +
         std::to_string(threads) +
         " --bind-to core) or not at all (--bind-to none); see "
         "docs/cluster.md";
}

}  // namespace mpitron::kernels
