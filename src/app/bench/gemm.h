// `mpitron bench gemm`: GFLOP/s of each CPU GEMM provider (kernels::GemmProvider) on the
// products of a GPT training step, beside one core's FP32 FMA peak measured on the spot.
#pragma once

#include <CLI/CLI.hpp>

#include "app/common/options.h"

namespace mpitron::app {

struct BenchGemmOptions {
  CommonOptions common;
  double seconds = 0.2;  ///< timing budget per product and provider
};

/// Adds the `gemm` subcommand and its flags (--seconds and the common ones except --tp --pp
/// --dp and --gemm: it times every provider) to `bench`.
CLI::App& add_bench_gemm_command(CLI::App& bench, BenchGemmOptions& options);

/// On world rank 0 (the other ranks wait): measures the FMA peak (kernels::cpu_fma_peak_gflops),
/// then times, with each provider the build has, the three products of each linear layer of two
/// GPT steps (forward y = x W^T, dx = dy W, dW = dy^T x): the train example's model (hidden 256,
/// vocab 256, 512 tokens per micro-batch) and GPT-2 124M (hidden 768, vocab 50304, 512 tokens),
/// for the attention's q/k/v and output projections, the MLP's two linears and the LM head.
/// Float32, 2 m n k FLOPs per product, the best of repeated calls within --seconds. Prints one
/// line per product (GFLOP/s per provider, the best as a share of the peak) and, with --json,
/// appends {"tool", "bench": "gemm", "peak_gflops", "results": [{"model", "layer", "pass", "m",
/// "n", "k", "<provider>_gflops", ...}]}. Throws comm::ConfigError for --seconds not in
/// (0, 60] or a CUDA --device (the providers are the CPU's).
int run_bench_gemm(const BenchGemmOptions& options, comm::Communicator world);

}  // namespace mpitron::app
