// GEMM throughput: square C = A B at n = 512, 1024, 2048 (float32; float64 on the smallest
// size), reported as GFLOP per second (the counter "GFLOP", a rate) with the usual 2 n^3 flop
// count.
#include "bench_main.h"
#include "kernels/ops.h"

namespace {

using mpitron::kernels::Buffer;
using mpitron::kernels::Device;
using mpitron::kernels::DType;

void gemm_square(benchmark::State& state, Device device, DType dtype) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer a(n * n, dtype, device), b(n * n, dtype, device), c(n * n, dtype, device);
  mpitron::kernels::fill(a, 0.5);
  mpitron::kernels::fill(b, 0.25);
  for (auto _ : state) {
    mpitron::kernels::gemm(false, false, n, n, n, 1.0, a, b, 0.0, c);
    mpitron::kernels::synchronize(device);
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * n;
  state.counters["GFLOP"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  return mpitron::bench::run_benchmarks(argc, argv, [] {
    mpitron::bench::register_on_devices(
        "sgemm", [](benchmark::State& s, Device d) { gemm_square(s, d, DType::f32); },
        [](auto* b) { b->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond); });
    mpitron::bench::register_on_devices(
        "dgemm", [](benchmark::State& s, Device d) { gemm_square(s, d, DType::f64); },
        [](auto* b) { b->Arg(512)->Unit(benchmark::kMillisecond); });
  });
}
