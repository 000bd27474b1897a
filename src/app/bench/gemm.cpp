#include "app/bench/gemm.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include "app/common/help.h"
#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "kernels/build_info.h"
#include "kernels/ops.h"
#include "nn/wording.h"

namespace mpitron::app {

CLI::App& add_bench_gemm_command(CLI::App& bench, BenchGemmOptions& options) {
  CLI::App& command = *bench.add_subcommand(
      "gemm", "GFLOP/s of each CPU GEMM provider on a GPT step's products, beside the FMA peak");
  add_run_options(command, options.common);
  command.remove_option(command.get_option("--gemm"));  // it times every provider
  command
      .add_option("--seconds", options.seconds,
                  "Seconds per product and provider (above 0, at most 60)")
      ->capture_default_str();
  add_example(command, "mpitron bench gemm --seconds 0.5");
  return command;
}

namespace {

// One product C[m, n] = op(A) op(B) of a linear layer's pass.
struct Product {
  const char* model;
  const char* layer;
  const char* pass;
  bool trans_a, trans_b;
  std::size_t m, n, k;
};

// The forward, input-gradient and weight-gradient products of a linear [out, in] on `tokens`
// rows.
void add_linear(std::vector<Product>& out, const char* model, const char* layer, std::size_t tokens,
                std::size_t in, std::size_t features) {
  out.push_back({model, layer, "forward", false, true, tokens, features, in});
  out.push_back({model, layer, "dx", false, false, tokens, in, features});
  out.push_back({model, layer, "dW", true, false, features, in, tokens});
}

std::vector<Product> gpt_products() {
  std::vector<Product> products;
  struct Model {
    const char* name;
    std::size_t hidden, vocab, tokens;
  };
  for (const Model m :
       {Model{"train example", 256, 256, 512}, Model{"GPT-2 124M", 768, 50304, 512}}) {
    add_linear(products, m.name, "qkv", m.tokens, m.hidden, 3 * m.hidden);
    add_linear(products, m.name, "attn proj", m.tokens, m.hidden, m.hidden);
    add_linear(products, m.name, "fc", m.tokens, m.hidden, 4 * m.hidden);
    add_linear(products, m.name, "fc proj", m.tokens, 4 * m.hidden, m.hidden);
    add_linear(products, m.name, "lm head", m.tokens, m.hidden, m.vocab);
  }
  return products;
}

// The best GFLOP/s of repeated calls within `seconds` (at least two).
double time_product(const Product& p, double seconds) {
  using Clock = std::chrono::steady_clock;
  const kernels::DType f32 = kernels::DType::f32;
  kernels::Buffer a(p.m * p.k, f32, kernels::Device::cpu), b(p.k * p.n, f32, kernels::Device::cpu);
  kernels::Buffer c(p.m * p.n, f32, kernels::Device::cpu);
  kernels::fill(a, 0.5);
  kernels::fill(b, 0.25);
  const double flops = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * p.k;
  double best = 0.0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (int call = 0; call < 2 || Clock::now() < end; ++call) {
    const auto t0 = Clock::now();
    kernels::gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0, a, b, 0.0, c);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (call > 0) best = std::max(best, flops / elapsed / 1e9);  // the first call warms up
  }
  return best;
}

}  // namespace

int run_bench_gemm(const BenchGemmOptions& options, comm::Communicator world) {
  comm::agree_on_configuration(world, [&] {
    if (!(options.seconds > 0.0 && options.seconds <= 60.0)) {
      throw comm::ConfigError(fmt::format("--seconds must be in (0, 60], got {}", options.seconds));
    }
    // The CPU GEMM is what it times, so auto means cpu here, also on a machine with a GPU.
    if (options.common.device == "cuda") {
      throw comm::ConfigError("bench gemm times the CPU GEMM: --device must be cpu or auto");
    }
    prepare_run(options.common, world);
    return fmt::format("bench gemm --seconds {}", options.seconds);
  });
  if (world.rank() == 0) {
    std::vector<kernels::GemmProvider> providers{kernels::GemmProvider::eigen};
    if (kernels::gemm_blas_available()) providers.push_back(kernels::GemmProvider::blas);
    providers.push_back(kernels::GemmProvider::mpitron);
    const kernels::GemmProvider chosen = kernels::gemm_provider();
    const double peak = kernels::cpu_fma_peak_gflops(std::max(0.2, options.seconds));
    const int threads = kernels::cpu_threads();  // --threads: the % is of threads x peak
    fmt::print(
        "bench gemm: float32, {}, best of repeated calls; FMA peak {:.1f} GFLOP/s per core "
        "({}); auto = {}\n{:<14} {:<10} {:<8} {:>22}",
        nn::counted(threads, "thread"), peak, kernels::cpu_vector_extensions(),
        kernels::to_string(kernels::default_gemm_provider()), "model", "layer", "pass",
        "m x n x k");
    for (const kernels::GemmProvider provider : providers)
      fmt::print(" {:>8}", kernels::to_string(provider));
    fmt::print(" {:>7}\n", "% peak");
    nlohmann::json results = nlohmann::json::array();
    for (const Product& p : gpt_products()) {
      nlohmann::json row{{"model", p.model}, {"layer", p.layer}, {"pass", p.pass},
                         {"m", p.m},         {"n", p.n},         {"k", p.k}};
      fmt::print("{:<14} {:<10} {:<8} {:>22}", p.model, p.layer, p.pass,
                 fmt::format("{} x {} x {}", p.m, p.n, p.k));
      double best = 0.0;
      for (const kernels::GemmProvider provider : providers) {
        kernels::set_gemm_provider(provider);
        const double gflops = time_product(p, options.seconds);
        best = std::max(best, gflops);
        row[kernels::to_string(provider) + "_gflops"] = gflops;
        fmt::print(" {:>8.1f}", gflops);
      }
      fmt::print(" {:>6.0f}%\n", 100.0 * best / (peak * threads));
      results.push_back(row);
    }
    kernels::set_gemm_provider(chosen);
    if (!options.common.json.empty()) {
      write_json(options.common.json,
                 nlohmann::json{{"tool", "mpitron"},
                                {"bench", "gemm"},
                                {"peak_gflops", peak},
                                {"threads", threads},
                                {"results", results}},
                 /*append=*/true);
    }
  }
  comm::barrier(world);
  return 0;
}

}  // namespace mpitron::app
