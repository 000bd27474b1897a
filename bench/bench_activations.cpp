// The one-pass kernels around the GEMMs: GELU forward/backward and row softmax on float32,
// reported as bytes read + written per second. On a GPU these are memory-bound; on the CPU the
// scalar libm erf/tanh/exp calls bound them first (compare with the machine's copy bandwidth).
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
  void (*run)(const Buffer& x, const Buffer& dy, Buffer& out);
};

const Case kCases[] = {
    {"gelu_forward_exact", 2,
     [](const Buffer& x, const Buffer&, Buffer& y) {
       mpitron::kernels::gelu_forward(x, y, GeluForm::exact);
     }},
    {"gelu_forward_tanh", 2,
     [](const Buffer& x, const Buffer&, Buffer& y) {
       mpitron::kernels::gelu_forward(x, y, GeluForm::tanh);
     }},
    {"gelu_backward_exact", 3,
     [](const Buffer& x, const Buffer& dy, Buffer& dx) {
       mpitron::kernels::gelu_backward(x, dy, dx, GeluForm::exact);
     }},
    {"softmax_forward", 2,
     [](const Buffer& x, const Buffer&, Buffer& y) {
       mpitron::kernels::softmax_forward(x, kCols, y);
     }},
};

/// Runs `c` over float32 buffers of state.range(0) elements.
void bandwidth(benchmark::State& state, Device device, const Case& c) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Buffer x(n, DType::f32, device), dy(n, DType::f32, device), out(n, DType::f32, device);
  mpitron::kernels::fill(x, 0.3);
  mpitron::kernels::fill(dy, 1.0);
  for (auto _ : state) {
    c.run(x, dy, out);
    mpitron::kernels::synchronize(device);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * c.passes *
                          static_cast<std::int64_t>(n * sizeof(float)));
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
  });
}
