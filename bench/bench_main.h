// Shared by the kernel benchmarks: registration for every available device, and a main().
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>

#include "kernels/device.h"

namespace mpitron::bench {

/// A benchmark body that runs on `device`.
using DeviceBenchmark = std::function<void(benchmark::State&, kernels::Device)>;

/// Registers `body` as "<name>/cpu" and, when a CUDA device is visible, "<name>/cuda"; `args`
/// adds the argument lists (e.g. matrix sizes) to each. Call before `run_benchmarks`.
void register_on_devices(const std::string& name, const DeviceBenchmark& body,
                         const std::function<void(benchmark::internal::Benchmark*)>& args);

/// Registers every benchmark through `registrations`, then runs Google Benchmark with argv.
int run_benchmarks(int argc, char** argv, const std::function<void()>& registrations);

}  // namespace mpitron::bench
