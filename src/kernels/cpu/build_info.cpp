// Compiled with the same flags as the CPU kernel files (src/kernels/CMakeLists.txt), so the
// macros seen here are the ones the kernels saw.
#include "kernels/build_info.h"

namespace mpitron::kernels {

std::string cpu_vector_extensions() {
  std::string out;
  const auto add = [&out](const char* name) {
    if (!out.empty()) out += ' ';
    out += name;
  };
#if defined(__AVX512F__)
  add("AVX512F");
#endif
#if defined(__AVX2__)
  add("AVX2");
#endif
#if defined(__FMA__)
  add("FMA");
#endif
#if defined(__AVX__)
  add("AVX");
#endif
#if defined(__SSE4_2__)
  add("SSE4.2");
#endif
#if defined(__SSE2__)
  add("SSE2");
#endif
#if defined(__ARM_NEON)
  add("NEON");
#endif
  return out.empty() ? "none" : out;
}

}  // namespace mpitron::kernels
