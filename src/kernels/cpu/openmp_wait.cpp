// How the CPU kernels' idle OpenMP threads wait, chosen at start unless the user chose
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). GNU OpenMP's default spins 300,000 times
// (GOMP_SPINCOUNT) before a thread that waits for work sleeps, after every parallel loop: ranks
// that share cores (more ranks x threads than cores) then burn the time their neighbours need
// (measured: the train example's step at --threads 2 on 2 busy cores took 5x longer spinning
// than sleeping), while sleeping at once costs a wake-up per loop on cores of the rank's own
// (the same step 1.3x slower than spinning 50 us first, on a quiet machine). So when more than
// one thread is asked for (--threads N or MPITRON_CPU_THREADS), the rule of openmp_wait_rule.h
// chooses GOMP_SPINCOUNT for about kOwnCoresSpinMicroseconds (the count from a spin timed here)
// when the rank's threads have cores of their own, else OMP_WAIT_POLICY=PASSIVE.
// libgomp reads these once, in its initializer, before main, and a setenv that runs even
// earlier (.preinit_array) is undone when libc's own initializer restores the environment it was
// started with. So the program executes itself again, at once, with the choice and
// MPITRON_OPENMP_WAIT (what the start-up line prints) added to its environment (same process,
// same arguments). One thread never starts an OpenMP region, so it never re-executes. The
// executable calls choose_openmp_wait from its .preinit_array (src/app/openmp_wait_hook.cpp):
// an entry there is the one thing a shared library cannot hold.
#include "kernels/cpu/openmp_wait.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cpu/openmp_wait_rule.h"
#include "kernels/ops.h"

namespace mpitron::kernels {
namespace {

constexpr const char* kChoiceVariable = "MPITRON_OPENMP_WAIT";

// The value of `entry` ("name=value") when it sets `name`, else nullptr.
const char* value_of(const char* entry, std::string_view name) {
  const std::string_view text(entry);
  if (text.size() > name.size() && text.starts_with(name) && text[name.size()] == '=') {
    return entry + name.size() + 1;
  }
  return nullptr;
}

// The value of `name` in `envp`, or nullptr. (getenv cannot be used yet: libc's environment
// pointer is set by its initializer, after this runs.)
const char* variable(char** envp, std::string_view name) {
  for (char** e = envp; *e != nullptr; ++e) {
    if (const char* value = value_of(*e, name)) return value;
  }
  return nullptr;
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

// The count `threads_argument` (the last --threads given) or else MPITRON_CPU_THREADS asks for,
// or 1 when neither does or the count is not one (the parser reports it).
std::int64_t thread_count(const char* threads_argument, char** envp) {
  const char* count =
      threads_argument != nullptr ? threads_argument : variable(envp, "MPITRON_CPU_THREADS");
  if (count == nullptr) return 1;
  std::string_view text(count);  // as strtol reads it: leading white space and a '+' allowed
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())) != 0)
    text.remove_prefix(1);
  if (text.starts_with('+')) text.remove_prefix(1);
  std::int64_t threads = 0;
  const auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), threads);
  const bool valid = status == std::errc() && end == text.data() + text.size() && threads >= 1 &&
                     threads <= kMaxCpuThreads;
  return valid ? threads : 1;
}

// The first `size` - 1 bytes of the file at `path`, NUL-terminated in `buffer`; false when it
// cannot be read.
bool read_file(const char* path, char* buffer, std::size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buffer, size - 1);
  close(fd);
  if (n < 0) return false;
  buffer[n] = '\0';
  return true;
}

// The CPUs of this process's cgroup v2 cpuset (cpuset.cpus.effective of the cgroup that
// /proc/self/cgroup names), or std::nullopt (cgroup v1, no cpuset controller there).
std::optional<std::int64_t> cgroup_cpus() {
  static char text[4096];
  static char path[4096];
  if (!read_file("/proc/self/cgroup", text, sizeof(text))) return std::nullopt;
  std::string_view line(text);
  if (!line.starts_with("0::")) return std::nullopt;
  line = line.substr(3, line.find('\n') - 3);
  char* end = path + sizeof(path) - 1;
  char* p =
      append(append(append(path, end, "/sys/fs/cgroup"), end, line), end, "/cpuset.cpus.effective");
  if (p == end) return std::nullopt;  // too long to be true
  *p = '\0';
  if (!read_file(path, text, sizeof(text))) return std::nullopt;
  return cpu_list_count(text);
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

// " (2 threads x 1 rank on 2 CPUs)", or " (2 threads x 2 ranks on 16 CPUs, 2 of them this
// rank's)" where its affinity mask is narrower.
char* append_share(char* out, char* end, std::int64_t threads, std::int64_t ranks,
                   std::int64_t in_mask, std::int64_t for_job) {
  out = append(append(append(out, end, " ("), end, threads), end, " threads x ");
  out = append(append(out, end, ranks), end, ranks == 1 ? " rank on " : " ranks on ");
  out = append(append(out, end, for_job), end, " CPUs");
  if (in_mask < for_job)
    out = append(append(append(out, end, ", "), end, in_mask), end, " of them this rank's");
  return append(out, end, ")");
}

// The CPUs in this process's affinity mask when it started, before libgomp pinned its first
// thread (OMP_PROC_BIND), and the online CPUs: cpu_mask_warning's counts. choose_openmp_wait
// sets them before main.
int g_cpus_in_mask_at_start = 0;
int g_online_cpus_at_start = 0;

}  // namespace

void choose_openmp_wait(const char* threads_argument, char** argv, char** envp) {
  const std::int64_t online = std::max<long>(sysconf(_SC_NPROCESSORS_ONLN), 1);
  cpu_set_t mask;
  const std::int64_t in_mask =
      sched_getaffinity(0, sizeof(mask), &mask) == 0 ? CPU_COUNT(&mask) : online;
  g_cpus_in_mask_at_start = static_cast<int>(in_mask);
  g_online_cpus_at_start = static_cast<int>(online);
  if (variable(envp, "OMP_WAIT_POLICY") != nullptr || variable(envp, "GOMP_SPINCOUNT") != nullptr) {
    return;
  }
  const std::int64_t threads = thread_count(threads_argument, envp);
  if (threads <= 1) return;
  // The executable itself, not /proc/self/exe (whose name `ps` and `pgrep` would then show);
  // started through the dynamic loader, it cannot be executed again alone: keep the default.
  static char exe[4096];
  const ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (length <= 0) return;
  exe[length] = '\0';
  const std::string_view path(exe, static_cast<std::size_t>(length));
  if (path.substr(path.rfind('/') + 1).starts_with("ld-")) return;
  const std::int64_t for_job = std::min(online, cgroup_cpus().value_or(online));
  const std::int64_t ranks = ranks_on_this_host(
      variable(envp, "OMPI_COMM_WORLD_LOCAL_SIZE"), variable(envp, "MPI_LOCALNRANKS"),
      variable(envp, "SLURM_STEP_TASKS_PER_NODE"), variable(envp, "SLURM_NODEID"));

  static char policy[64];
  static char choice[256];
  char* policy_end = policy + sizeof(policy) - 1;
  char* choice_end = choice + sizeof(choice) - 1;
  char* text = append(append(choice, choice_end, kChoiceVariable), choice_end, "=");
  text = append(append(text, choice_end, static_cast<std::int64_t>(getpid())), choice_end, " ");
  if (threads_have_own_cores(threads, ranks, in_mask, for_job)) {
    const std::int64_t spins = spin_count(kOwnCoresSpinMicroseconds, nanoseconds_per_spin());
    append(append(policy, policy_end, "GOMP_SPINCOUNT="), policy_end, spins);
    text = append(text, choice_end, "idle threads spin ");
    text = append(text, choice_end, static_cast<std::int64_t>(kOwnCoresSpinMicroseconds));
    text = append(text, choice_end, " us, then sleep");
  } else {
    append(policy, policy_end, "OMP_WAIT_POLICY=PASSIVE");
    text = append(text, choice_end, "idle threads sleep");
  }
  append_share(text, choice_end, threads, ranks, in_mask, for_job);

  // The environment less any MPITRON_OPENMP_WAIT inherited, plus the choice.
  std::size_t count = 0;
  while (envp[count] != nullptr)
    ++count;
  char** env = static_cast<char**>(std::malloc((count + 3) * sizeof(char*)));
  if (env == nullptr) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (value_of(envp[i], kChoiceVariable) == nullptr) env[kept++] = envp[i];
  }
  env[kept] = policy;
  env[kept + 1] = choice;
  env[kept + 2] = nullptr;
  execve(exe, argv, env);  // returns only on failure: carry on with the default
  std::free(env);
}

std::string openmp_wait_text() {
  // Only this process's own choice: "<pid> <text>" (a variable inherited from another process
  // names another pid).
  if (const char* choice = std::getenv(kChoiceVariable)) {
    const std::string_view text(choice);
    const std::size_t space = text.find(' ');
    if (space != std::string_view::npos &&
        text.substr(0, space) == std::to_string(static_cast<long long>(getpid()))) {
      return std::string(text.substr(space + 1));
    }
  }
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    if (const char* value = std::getenv(name)) return std::string(name) + "=" + value;
  }
  return "GNU OpenMP's default wait";
}

std::optional<std::string> cpu_mask_warning(int threads) {
  if (threads <= g_cpus_in_mask_at_start) return std::nullopt;
  const std::int64_t online = g_online_cpus_at_start;
  return cpu_mask_warning_text(threads, g_cpus_in_mask_at_start,
                               std::min(online, cgroup_cpus().value_or(online)));
}

}  // namespace mpitron::kernels
