// Exits 0 when this CPU has AVX-512 F, DQ, VL and BW (run by src/kernels/CMakeLists.txt at
// configure time).
int main() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")
             ? 0
             : 1;
}
