#include "bench_main.h"

#include "kernels/ops.h"

namespace mpitron::bench {

void register_on_devices(const std::string& name, const DeviceBenchmark& body,
                         const std::function<void(benchmark::internal::Benchmark*)>& args) {
  for (kernels::Device device : {kernels::Device::cpu, kernels::Device::cuda}) {
    if (device == kernels::Device::cuda && !kernels::cuda_available()) continue;
    auto* bench = benchmark::RegisterBenchmark(
        (name + "/" + kernels::to_string(device)).c_str(),
        [body, device](benchmark::State& state) { body(state, device); });
    // CUDA work runs off the CPU: time it by wall clock (each iteration synchronizes). CPU
    // kernels keep CPU time, which other processes on a shared machine do not inflate.
    if (device == kernels::Device::cuda) bench->UseRealTime();
    args(bench);
  }
}

int run_benchmarks(int argc, char** argv, const std::function<void()>& registrations) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_threads", std::to_string(kernels::cpu_threads()));
  registrations();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace mpitron::bench
