// How the CPU kernels' idle OpenMP threads wait, chosen at start unless the user chose
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). GNU OpenMP's default spins 300,000 times
// (GOMP_SPINCOUNT) before a thread that waits for work sleeps, after every parallel loop: ranks
// that share cores (more ranks x threads than cores) then burn the time their neighbours need
// (measured: the train example's step at --threads 2 on 2 busy cores took 5x longer spinning
// than sleeping), while sleeping at once costs a wake-up per loop on cores of the rank's own
// (the same step 1.3x slower than spinning 100 us first, on a quiet machine). So when more than
// one thread is asked for (--threads N or MPITRON_CPU_THREADS), the rule of openmp_wait_rule.h
// chooses GOMP_SPINCOUNT for about kOwnCoresSpinMicroseconds (the count from a spin timed here)
// when the rank's threads have cores of their own, else OMP_WAIT_POLICY=PASSIVE.
// libgomp reads these once, in its initializer, before main, and a setenv that runs even
// earlier (.preinit_array) is undone when libc's own initializer restores the environment it was
// started with. So the program executes itself again, at once, with the choice and
// MPITRON_OPENMP_WAIT (what the start-up line prints) added to its environment (same process,
// same arguments). One thread never starts an OpenMP region, so it never re-executes.
#include "app/openmp_wait.h"

#include <fmt/format.h>

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "app/openmp_wait_rule.h"

namespace mpitron::app {
namespace {

constexpr const char* kChoiceVariable = "MPITRON_OPENMP_WAIT";

// The value of `name` in `envp`, or nullptr. (getenv cannot be used yet: libc's environment
// pointer is set by its initializer, after this runs.)
const char* variable(char** envp, std::string_view name) {
  for (char** e = envp; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=') {
      return *e + name.size() + 1;
    }
  }
  return nullptr;
}

// The thread count --threads N, --threads=N or MPITRON_CPU_THREADS asks for (the last --threads
// wins, as in the parser; an invalid count is the parser's to report).
long thread_count(int argc, char** argv, char** envp) {
  const char* count = variable(envp, "MPITRON_CPU_THREADS");
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--threads" && i + 1 < argc) count = argv[i + 1];
    if (arg.starts_with("--threads=")) count = argv[i] + std::strlen("--threads=");
  }
  return count == nullptr ? 1 : std::atol(count);
}

double now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// One spin of libgomp's wait loop (a relaxed load, then a pause), timed: the least of 4 rounds
// of 1,000 (at most about 0.6 ms where a pause takes 140 cycles).
double nanoseconds_per_spin() {
  constexpr int kSpins = 1000;
  std::atomic<int> flag{0};
  double best = 0.0;
  for (int round = 0; round < 4; ++round) {
    const double start = now_ns();
    for (int i = 0; i < kSpins; ++i) {
      if (flag.load(std::memory_order_relaxed) != 0) break;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    const double per_spin = (now_ns() - start) / kSpins;
    best = round == 0 ? per_spin : std::min(best, per_spin);
  }
  return best;
}

// Appends `text` to the buffer at `out` (ending before `end`); returns the new end.
char* append(char* out, char* end, std::string_view text) {
  const std::size_t n = std::min<std::size_t>(text.size(), static_cast<std::size_t>(end - out));
  std::memcpy(out, text.data(), n);
  return out + n;
}

char* append(char* out, char* end, std::int64_t value) {
  const auto [next, status] = std::to_chars(out, end, value);
  return status == std::errc() ? next : out;
}

// "... (2 threads x 1 rank on 2 CPUs)" or "... (2 threads bound to 1 CPU)".
char* append_share(char* out, char* end, long threads, std::int64_t ranks, std::int64_t in_mask,
                   std::int64_t online) {
  out = append(append(append(out, end, " ("), end, threads), end, " threads ");
  if (in_mask < online) {
    out = append(append(out, end, "bound to "), end, in_mask);
    return append(out, end, in_mask == 1 ? " CPU)" : " CPUs)");
  }
  out = append(append(append(out, end, "x "), end, ranks), end, ranks == 1 ? " rank" : " ranks");
  return append(append(append(out, end, " on "), end, online), end, " CPUs)");
}

void choose_openmp_waiting(int argc, char** argv, char** envp) {
  if (variable(envp, "OMP_WAIT_POLICY") != nullptr || variable(envp, "GOMP_SPINCOUNT") != nullptr) {
    return;
  }
  const long threads = thread_count(argc, argv, envp);
  if (threads <= 1) return;
  const std::int64_t online = std::max<long>(sysconf(_SC_NPROCESSORS_ONLN), 1);
  cpu_set_t mask;
  const std::int64_t in_mask =
      sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : online;
  const std::int64_t ranks = ranks_on_this_host(
      variable(envp, "OMPI_COMM_WORLD_LOCAL_SIZE"), variable(envp, "MPI_LOCALNRANKS"),
      variable(envp, "SLURM_STEP_TASKS_PER_NODE"), variable(envp, "SLURM_NODEID"));

  static char policy[64];
  static char choice[192];
  char* policy_end = policy + sizeof(policy) - 1;
  char* choice_end = choice + sizeof(choice) - 1;
  char* text = append(append(choice, choice_end, kChoiceVariable), choice_end, "=");
  if (threads_have_own_cores(threads, ranks, in_mask, online)) {
    const std::int64_t spins = spin_count(kOwnCoresSpinMicroseconds, nanoseconds_per_spin());
    append(append(policy, policy_end, "GOMP_SPINCOUNT="), policy_end, spins);
    text = append(text, choice_end, "idle threads spin ");
    text = append(text, choice_end, static_cast<std::int64_t>(kOwnCoresSpinMicroseconds));
    text = append(text, choice_end, " us, then sleep");
  } else {
    append(policy, policy_end, "OMP_WAIT_POLICY=PASSIVE");
    text = append(text, choice_end, "idle threads sleep");
  }
  append_share(text, choice_end, threads, ranks, in_mask, online);

  std::size_t count = 0;
  while (envp[count] != nullptr)
    ++count;
  char** env = static_cast<char**>(std::malloc((count + 3) * sizeof(char*)));
  if (env == nullptr) return;
  std::memcpy(env, envp, count * sizeof(char*));
  env[count] = policy;
  env[count + 1] = choice;
  env[count + 2] = nullptr;
  execve("/proc/self/exe", argv, env);  // returns only on failure: carry on with the default
  std::free(env);
}

}  // namespace

std::string openmp_wait_text() {
  if (const char* choice = std::getenv(kChoiceVariable)) return choice;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    if (const char* value = std::getenv(name)) return std::string(name) + "=" + value;
  }
  return "GNU OpenMP's default wait";
}

std::optional<std::string> cpu_mask_warning(int threads) {
  cpu_set_t mask;
  if (threads <= 1 || sched_getaffinity(0, sizeof(mask), &mask) != 0) return std::nullopt;
  const int cpus = CPU_COUNT(&mask);
  if (threads <= cpus) return std::nullopt;
  return fmt::format(
      "{} threads per rank, but this rank is bound to {} CPU{}, so its threads take turns: bind "
      "each rank to as many cores as threads (mpirun --map-by slot:PE={} --bind-to core) or not "
      "at all (--bind-to none); see docs/cluster.md",
      threads, cpus, cpus == 1 ? "" : "s", threads);
}

}  // namespace mpitron::app

__attribute__((section(".preinit_array"), used)) static void (*preinit_openmp_waiting)(
    int, char**, char**) = mpitron::app::choose_openmp_waiting;
