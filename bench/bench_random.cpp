// Seeded tensor creation on the host (autograd::randn and autograd::uniform, float32): what
// building a model's master weights costs per element, e.g. GPT-2 124M's 124 million draws at
// start-up. Counter: elements per second.
#include "autograd/random.h"
#include "bench_main.h"

namespace {

using mpitron::autograd::DType;

void randn(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  for (auto _ : state)
    benchmark::DoNotOptimize(mpitron::autograd::randn({n}, 7, 0.02, DType::f32));
  state.SetItemsProcessed(state.iterations() * n);
}

void uniform(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  for (auto _ : state)
    benchmark::DoNotOptimize(mpitron::autograd::uniform({n}, 7, -1.0, 1.0, DType::f32));
  state.SetItemsProcessed(state.iterations() * n);
}

}  // namespace

int main(int argc, char** argv) {
  return mpitron::bench::run_benchmarks(argc, argv, [] {
    benchmark::RegisterBenchmark("randn", randn)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("uniform", uniform)->Arg(1 << 20)->Unit(benchmark::kMillisecond);
  });
}
