// Exits 0 when this CPU has AVX2 and FMA (run by src/kernels/CMakeLists.txt at configure time).
int main() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 0 : 1;
}
