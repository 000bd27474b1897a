// The one-pass kernels around the GEMMs: GELU forward/backward (apart and in one pass), row
// softmax, LayerNorm forward + backward and cross-entropy over GPT-2's vocabulary on float32,
// reported as bytes read + written per second. On a GPU these are memory-bound; on the CPU the
// exponentials, erf and tanh bound them first (compare with the machine's copy bandwidth).
#include <algorithm>

#include "bench_main.h"
#include "kernels/ops.h"

namespace {

using mpitron::kernels::Buffer;
using mpitron::kernels::Device;
using mpitron::kernels::DType;
using mpitron::kernels::GeluForm;

constexpr std::size_t kCols = 1024;  // softmax row length (e.g. a sequence of attention scores)

/// One memory-bound op: `passes` is how many buffers of n elements one call reads plus writes.
struct Case {
  const char* name;
  int passes;
  void (*run)(const Buffer& x, const Buffer& dy, Buffer& out, Buffer& out2);
};

const Case kCases[] = {
    {"gelu_forward_exact", 2,
     [](const Buffer& x, const Buffer&, Buffer& y, Buffer&) {
       mpitron::kernels::gelu_forward(x, y, GeluForm::exact);
     }},
    {"gelu_forward_tanh", 2,
     [](const Buffer& x, const Buffer&, Buffer& y, Buffer&) {
       mpitron::kernels::gelu_forward(x, y, GeluForm::tanh);
     }},
    {"gelu_backward_exact", 3,
     [](const Buffer& x, const Buffer& dy, Buffer& dx, Buffer&) {
       mpitron::kernels::gelu_backward(x, dy, dx, GeluForm::exact);
     }},
    {"gelu_forward_backward_exact", 4,
     [](const Buffer& x, const Buffer& dy, Buffer& y, Buffer& dx) {
       mpitron::kernels::gelu_forward_backward(x, dy, y, dx, GeluForm::exact);
     }},
    {"softmax_forward", 2,
     [](const Buffer& x, const Buffer&, Buffer& y, Buffer&) {
       mpitron::kernels::softmax_forward(x, kCols, y);
     }},
};

/// Runs `c` over float32 buffers of state.range(0) elements.
void bandwidth(benchmark::State& state, Device device, const Case& c) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer x(n, DType::f32, device), dy(n, DType::f32, device), out(n, DType::f32, device),
      out2(n, DType::f32, device);
  mpitron::kernels::fill(x, 0.3);
  mpitron::kernels::fill(dy, 1.0);
  for (auto _ : state) {
    c.run(x, dy, out, out2);
    mpitron::kernels::synchronize(device);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * c.passes *
                          static_cast<std::int64_t>(n * sizeof(float)));
}

/// LayerNorm forward then backward over the whole rows of kLayerNormCols (GPT-2's hidden size) in
/// state.range(0) elements: x read and y written forward, x, dy read and dx written backward
/// (5 passes; the row statistics and the weight and bias gradients are small beside them).
constexpr std::size_t kLayerNormCols = 768;

void layer_norm(benchmark::State& state, Device device) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::size_t rows = n / kLayerNormCols, elements = rows * kLayerNormCols;
  Buffer x(elements, DType::f32, device), y(elements, DType::f32, device);
  Buffer xhat(elements, DType::f32, device);
  Buffer dx(elements, DType::f32, device);
  Buffer weight(kLayerNormCols, DType::f32, device), bias(kLayerNormCols, DType::f32, device);
  Buffer dweight(kLayerNormCols, DType::f32, device), dbias(kLayerNormCols, DType::f32, device);
  Buffer rstd(rows, DType::f32, device);
  mpitron::kernels::fill(x, 0.3);
  mpitron::kernels::fill(weight, 1.0);
  mpitron::kernels::fill(bias, 0.1);
  for (auto _ : state) {
    mpitron::kernels::layer_norm_forward(x, weight, bias, kLayerNormCols, 1e-5, y, xhat, rstd);
    mpitron::kernels::layer_norm_backward(xhat, weight, rstd, y, kLayerNormCols, dx, dweight,
                                          dbias);
    mpitron::kernels::synchronize(device);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 5 *
                          static_cast<std::int64_t>(elements * sizeof(float)));
}

/// Cross-entropy over the whole rows of GPT-2's padded vocabulary (50304 columns, 50257 used) in
/// state.range(0) elements (one row at least): row max, statistics and logit gradient, as the LM
/// head's loss runs them; logits read three times and dlogits written once (4 passes).
constexpr std::size_t kVocabCols = 50304, kVocabUsed = 50257;

void cross_entropy(benchmark::State& state, Device device) {
  const std::size_t rows =
      std::max<std::size_t>(1, static_cast<std::size_t>(state.range(0)) / kVocabCols);
  const std::size_t elements = rows * kVocabCols;
  Buffer logits(elements, DType::f32, device), dlogits(elements, DType::f32, device);
  Buffer targets(rows, DType::i32, device), dloss(1, DType::f32, device);
  Buffer row_max(rows, DType::f32, device), sum_exp(rows, DType::f32, device);
  Buffer target_logit(rows, DType::f32, device);
  mpitron::kernels::fill(logits, 0.3);
  mpitron::kernels::fill(targets, 7);
  mpitron::kernels::fill(dloss, 1.0);
  for (auto _ : state) {
    mpitron::kernels::row_max(logits, kVocabCols, kVocabUsed, row_max);
    mpitron::kernels::cross_entropy_stats(logits, kVocabCols, kVocabUsed, targets, 0, row_max,
                                          sum_exp, target_logit);
    mpitron::kernels::cross_entropy_backward(logits, kVocabCols, kVocabUsed, targets, 0, row_max,
                                             sum_exp, dloss, static_cast<double>(rows), dlogits);
    mpitron::kernels::synchronize(device);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 4 *
                          static_cast<std::int64_t>(elements * sizeof(float)));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1 << 16)->Arg(1 << 22)->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  return mpitron::bench::run_benchmarks(argc, argv, [] {
    for (const Case& c : kCases) {
      mpitron::bench::register_on_devices(
          c.name, [&c](benchmark::State& s, Device d) { bandwidth(s, d, c); }, sizes);
    }
    mpitron::bench::register_on_devices("layer_norm_forward_backward", layer_norm, sizes);
    mpitron::bench::register_on_devices("cross_entropy_gpt2_vocab", cross_entropy, sizes);
  });
}
