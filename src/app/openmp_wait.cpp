// Passive waiting for the CPU kernels' OpenMP threads, unless the user chose a policy. GNU
// OpenMP's default (OMP_WAIT_POLICY unset) spins for 300,000 iterations (GOMP_SPINCOUNT) before
// a thread that waits for work sleeps, after every parallel loop; ranks that share cores (more
// ranks x threads than cores) then burn the time their neighbours need (measured: the train
// example's step at --threads 2 on 2 busy cores took 5x longer spinning than waiting passively).
// libgomp reads the variable once, in its initializer, before main, and a setenv that runs even
// earlier (.preinit_array) is undone when libc's own initializer restores the environment it was
// started with. So when more than one thread is asked for (--threads N or MPITRON_CPU_THREADS)
// and neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, the program executes itself again, at
// once, with OMP_WAIT_POLICY=PASSIVE added to its environment (same process, same arguments).
// One thread never starts an OpenMP region, so it never re-executes.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace {

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

// Whether --threads N, --threads=N or MPITRON_CPU_THREADS asks for more than one thread (the
// last --threads wins, as in the parser; an invalid count is the parser's to report).
bool threaded(int argc, char** argv, char** envp) {
  const char* count = variable(envp, "MPITRON_CPU_THREADS");
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--threads" && i + 1 < argc) count = argv[i + 1];
    if (arg.starts_with("--threads=")) count = argv[i] + std::strlen("--threads=");
  }
  return count != nullptr && std::atol(count) > 1;
}

void passive_openmp_waiting(int argc, char** argv, char** envp) {
  if (variable(envp, "OMP_WAIT_POLICY") != nullptr || variable(envp, "GOMP_SPINCOUNT") != nullptr ||
      !threaded(argc, argv, envp)) {
    return;
  }
  std::size_t count = 0;
  while (envp[count] != nullptr)
    ++count;
  char** env = static_cast<char**>(std::malloc((count + 2) * sizeof(char*)));
  if (env == nullptr) return;
  std::memcpy(env, envp, count * sizeof(char*));
  static char passive[] = "OMP_WAIT_POLICY=PASSIVE";
  env[count] = passive;
  env[count + 1] = nullptr;
  execve("/proc/self/exe", argv, env);  // returns only on failure: carry on spinning
  std::free(env);
}

}  // namespace

__attribute__((section(".preinit_array"),
               used)) static void (*preinit_passive_openmp)(int, char**,
                                                            char**) = passive_openmp_waiting;
