#include "app/bench/gemm.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "app/common/gemm_agreement.h"
#include "app/common/help.h"
#include "comm/collectives.h"
#include "comm/configuration.h"
#include "comm/errors.h"
#include "kernels/build_info.h"
#include "kernels/ops.h"
#include "nn/wording.h"

namespace mpitron::app {

namespace {

// --dtype of `bench gemm`: "float32" (every provider) or "bfloat16" (kernels::gemm_bf16 beside
// the float32 packed GEMM). Kept here rather than in BenchGemmOptions so that the flag stays in
// this file.
std::string& gemm_dtype() {
  static std::string dtype = "float32";
  return dtype;
}

}  // namespace

CLI::App& add_bench_gemm_command(CLI::App& bench, BenchGemmOptions& options) {
  CLI::App& command = *bench.add_subcommand(
      "gemm", "GFLOP/s of each CPU GEMM provider on a GPT step's products, beside the FMA peak");
  add_run_options(command, options.common);
  command.remove_option(command.get_option("--gemm"));  // it times every provider
  command
      .add_option("--seconds", options.seconds,
                  "Seconds per product and provider (above 0, at most 60)")
      ->capture_default_str();
  command
      .add_option("--dtype", gemm_dtype(),
                  "float32: every provider; bfloat16: the bfloat16 GEMM (float32 and bfloat16 "
                  "C) beside mpitron's float32 one, naming the path that ran")
      ->check(CLI::IsMember({"float32", "bfloat16"}))
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
  // The tied LM head of `compare_with_torch.py --workload llama` (SmolLM-135M's width, a
  // micro-batch of 3 x 128 tokens): 2/3 of that step's FLOPs.
  add_linear(products, "SmolLM-135M", "lm head", 384, 576, 49152);
  return products;
}

// The best GFLOP/s of p by repeated calls of multiply() within `seconds` (at least two).
template <class Multiply>
double best_gflops(const Product& p, double seconds, Multiply multiply) {
  using Clock = std::chrono::steady_clock;
  const double flops = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * p.k;
  double best = 0.0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (int call = 0; call < 2 || Clock::now() < end; ++call) {
    const auto t0 = Clock::now();
    multiply();
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (call > 0) best = std::max(best, flops / elapsed / 1e9);  // the first call warms up
  }
  return best;
}

// A [rows, cols] operand of `dtype` holding `value` (bfloat16 through a float32 buffer).
kernels::Buffer operand(std::size_t count, kernels::DType dtype, double value) {
  kernels::Buffer f32(count, kernels::DType::f32, kernels::Device::cpu);
  kernels::fill(f32, value);
  if (dtype == kernels::DType::f32) return f32;
  kernels::Buffer out(count, dtype, kernels::Device::cpu);
  kernels::convert(f32, out);
  return out;
}

// float32 through the current provider (kernels::gemm).
double time_product(const Product& p, double seconds) {
  const kernels::Buffer a = operand(p.m * p.k, kernels::DType::f32, 0.5);
  const kernels::Buffer b = operand(p.k * p.n, kernels::DType::f32, 0.25);
  kernels::Buffer c(p.m * p.n, kernels::DType::f32, kernels::Device::cpu);
  return best_gflops(
      p, seconds, [&] { kernels::gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0, a, b, 0.0, c); });
}

// bfloat16 A and B into a C of `c_dtype` (kernels::gemm_bf16).
double time_bf16_product(const Product& p, double seconds, kernels::DType c_dtype) {
  const kernels::Buffer a = operand(p.m * p.k, kernels::DType::bf16, 0.5);
  const kernels::Buffer b = operand(p.k * p.n, kernels::DType::bf16, 0.25);
  kernels::Buffer c(p.m * p.n, c_dtype, kernels::Device::cpu);
  return best_gflops(p, seconds, [&] {
    kernels::gemm_bf16(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0, a, b, 0.0, c);
  });
}

// One column of the table: its heading, its JSON key and how it times a product.
struct Column {
  std::string heading, key;
  std::function<double(const Product&)> time;
};

// float32: one column per provider of the build. bfloat16: mpitron's float32 GEMM, then the
// bfloat16 GEMM into float32 and into bfloat16 C.
std::vector<Column> columns(bool bf16, double seconds) {
  std::vector<Column> out;
  std::vector<kernels::GemmProvider> providers{kernels::GemmProvider::mpitron};
  if (!bf16) {
    providers = {kernels::GemmProvider::eigen};
    if (kernels::gemm_blas_available()) providers.push_back(kernels::GemmProvider::blas);
    providers.push_back(kernels::GemmProvider::mpitron);
  }
  for (const kernels::GemmProvider provider : providers) {
    out.push_back({kernels::to_string(provider), kernels::to_string(provider) + "_gflops",
                   [provider, seconds](const Product& p) {
                     kernels::set_gemm_provider(provider);
                     return time_product(p, seconds);
                   }});
  }
  if (bf16) {
    for (const kernels::DType c : {kernels::DType::f32, kernels::DType::bf16}) {
      const bool into_f32 = c == kernels::DType::f32;
      out.push_back({into_f32 ? "bf16>f32" : "bf16>bf16",
                     into_f32 ? "bf16_f32_gflops" : "bf16_bf16_gflops",
                     [c, seconds](const Product& p) { return time_bf16_product(p, seconds, c); }});
    }
  }
  return out;
}

// Auto's provider and the rates it was chosen from (rank 0's, as agreed at start-up).
nlohmann::json auto_json() {
  const kernels::GemmChoice choice = agreed_auto_gemm_choice();
  nlohmann::json rates = nlohmann::json::object();
  for (const kernels::GemmRate& rate : choice.rates)
    rates[kernels::to_string(rate.provider)] = rate.gflops;
  return {{"provider", kernels::to_string(choice.provider)},
          {"source", kernels::to_string(choice.source)},
          {"threads", choice.threads},
          {"gflops", rates}};
}

}  // namespace

int run_bench_gemm(const BenchGemmOptions& options, comm::Communicator world) {
  const bool bf16 = gemm_dtype() == "bfloat16";
  comm::agree_on_configuration(world, [&] {
    if (!(options.seconds > 0.0 && options.seconds <= 60.0)) {
      throw comm::ConfigError(fmt::format("--seconds must be in (0, 60], got {}", options.seconds));
    }
    // The CPU GEMM is what it times, so auto means cpu here, also on a machine with a GPU.
    if (options.common.device == "cuda") {
      throw comm::ConfigError("bench gemm times the CPU GEMM: --device must be cpu or auto");
    }
    prepare_run(options.common, world);
    return fmt::format("bench gemm --seconds {} --dtype {}", options.seconds, gemm_dtype());
  });
  if (world.rank() == 0) {
    const kernels::GemmProvider chosen = kernels::gemm_provider();
    const double fma_peak = kernels::cpu_fma_peak_gflops(std::max(0.2, options.seconds));
    // Under bfloat16 on a CPU with AVX512-BF16 the % is of the VDPBF16PS peak, for the bfloat16
    // columns; otherwise of the FMA peak.
    const double dot_peak =
        bf16 ? kernels::cpu_bf16_dot_peak_gflops(std::max(0.2, options.seconds)) : 0.0;
    const double peak = dot_peak > 0.0 ? dot_peak : fma_peak;
    const int threads = kernels::cpu_threads();  // --threads: the % is of threads x peak
    const std::string path = kernels::to_string(kernels::bf16_gemm_path());
    const std::string what =
        bf16 ? "bfloat16 (path: " + path + ") beside mpitron's float32" : "float32";
    const std::string blas = kernels::gemm_blas_available()
                                 ? "; OpenBLAS kernels " + kernels::gemm_blas_kernel()
                                 : std::string();
    const std::string dot =
        dot_peak > 0.0
            ? fmt::format(
                  "; VDPBF16PS peak {:.1f} GFLOP/s per core (% of it: the bfloat16 columns)",
                  dot_peak)
            : std::string();
    fmt::print(
        "bench gemm: {}, {}, best of repeated calls; FMA peak {:.1f} GFLOP/s per core "
        "({}){}{}; auto = {}\n{:<14} {:<10} {:<8} {:>22}",
        what, nn::counted(threads, "thread"), fma_peak, kernels::cpu_vector_extensions(), dot, blas,
        gemm_choice_text(agreed_auto_gemm_choice()), "model", "layer", "pass", "m x n x k");
    const std::vector<Column> timed = columns(bf16, options.seconds);
    for (const Column& column : timed)
      fmt::print(" {:>9}", column.heading);
    fmt::print(" {:>7}\n", "% peak");
    nlohmann::json results = nlohmann::json::array();
    for (const Product& p : gpt_products()) {
      nlohmann::json row{{"model", p.model}, {"layer", p.layer}, {"pass", p.pass},
                         {"m", p.m},         {"n", p.n},         {"k", p.k}};
      fmt::print("{:<14} {:<10} {:<8} {:>22}", p.model, p.layer, p.pass,
                 fmt::format("{} x {} x {}", p.m, p.n, p.k));
      double best = 0.0;
      for (const Column& column : timed) {
        const double gflops = column.time(p);
        if (dot_peak == 0.0 || column.key != std::string("mpitron_gflops"))
          best = std::max(best, gflops);
        row[column.key] = gflops;
        fmt::print(" {:>9.1f}", gflops);
      }
      fmt::print(" {:>6.0f}%\n", 100.0 * best / (peak * threads));
      results.push_back(row);
    }
    kernels::set_gemm_provider(chosen);
    if (!options.common.json.empty()) {
      write_json(options.common.json,
                 nlohmann::json{{"tool", "mpitron"},
                                {"bench", "gemm"},
                                {"dtype", gemm_dtype()},
                                {"bf16_path", path},
                                {"peak_gflops", fma_peak},
                                {"bf16_dot_peak_gflops", dot_peak},
                                {"threads", threads},
                                {"auto", auto_json()},
                                {"results", results}},
                 /*append=*/true);
    }
  }
  comm::barrier(world);
  return 0;
}

}  // namespace mpitron::app
