// Records every instrumented function's entry and return (GCC's -finstrument-functions hooks)
// and, at exit, writes them with the process's memory map to $MPITRON_TRACE_CALLS.<pid>:
// the input of tools/startup_path/startup_path.py. Built as a shared library that
// tools/startup_path/measure.sh preloads into an instrumented build; not part of mpitron.
#include <unistd.h>
#include <cstdio>
#include <cstdlib>


extern "C" {
void __cyg_profile_func_enter(void* function, void* call_site)
    __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void* function, void* call_site)
    __attribute__((no_instrument_function));
}

namespace {

struct Event {
  void* function;
  bool is_return;
};
constexpr std::size_t kMaxEvents = 1 << 23;
Event g_events[kMaxEvents];
std::size_t g_count = 0;

__attribute__((no_instrument_function, destructor)) void write_calls() {
  const char* prefix = std::getenv("MPITRON_TRACE_CALLS");
  if (prefix == nullptr) return;
  char path[4096];
  std::snprintf(path, sizeof(path), "%s.%d", prefix, static_cast<int>(getpid()));
  FILE* out = std::fopen(path, "w");
  if (out == nullptr) return;
  FILE* maps = std::fopen("/proc/self/maps", "r");
  char line[4096];
  while (maps != nullptr && std::fgets(line, sizeof(line), maps) != nullptr)
    std::fprintf(out, "map %s", line);
  if (maps != nullptr) std::fclose(maps);
  for (std::size_t i = 0; i < g_count; ++i) {
    std::fprintf(out, "%s %p\n", g_events[i].is_return ? "return" : "call", g_events[i].function);
  }
  std::fclose(out);
}

}  // namespace

void __cyg_profile_func_enter(void* function, void*) {
  if (g_count < kMaxEvents) g_events[g_count++] = {function, false};
}

void __cyg_profile_func_exit(void* function, void*) {
  if (g_count < kMaxEvents) g_events[g_count++] = {function, true};
}
