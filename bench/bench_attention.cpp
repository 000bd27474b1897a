// Causal attention forward + backward of one GPT-2 layer's heads (12 heads of head_dim 64, one
// sequence, float32) at seq 256, 1024 and 2048: the fused kernels (attention_forward /
// attention_backward: blocked online softmax, key blocks above the diagonal skipped, nothing of
// size [seq, seq] stored) beside the unfused op sequence the references run (scores GEMM,
// causal softmax, P V GEMM; backward dV = P^T dO, dP = dO V^T, softmax backward, dQ = dS K,
// dK = dS^T Q), whose [heads, seq, seq] scores, probabilities and their gradients are the
// counter `score_bytes`.
#include <cmath>

#include "bench_main.h"
#include "kernels/ops.h"

namespace {

using mpitron::kernels::Buffer;
using mpitron::kernels::Device;
using mpitron::kernels::DType;
namespace k = mpitron::kernels;

constexpr std::size_t kHeads = 12, kHeadDim = 64;

struct Inputs {
  std::size_t seq, n;
  Buffer q, kk, v, dout, o, dq, dk, dv;

  Inputs(std::size_t s, Device device)
      : seq(s),
        n(kHeads * s * kHeadDim),
        q(n, DType::f32, device),
        kk(n, DType::f32, device),
        v(n, DType::f32, device),
        dout(n, DType::f32, device),
        o(n, DType::f32, device),
        dq(n, DType::f32, device),
        dk(n, DType::f32, device),
        dv(n, DType::f32, device) {
    k::fill(q, 0.1);
    k::fill(kk, -0.2);
    k::fill(v, 0.3);
    k::fill(dout, 1.0);
  }
};

const double kScale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));

void fused(benchmark::State& state, Device device) {
  Inputs in(static_cast<std::size_t>(state.range(0)), device);
  Buffer lse(kHeads * in.seq, DType::f32, device);
  for (auto _ : state) {
    k::attention_forward(in.q, in.kk, in.v, in.seq, kHeadDim, true, kScale, in.o, lse);
    k::attention_backward(in.q, in.kk, in.v, in.o, lse, in.dout, in.seq, kHeadDim, true, kScale,
                          in.dq, in.dk, in.dv);
    k::synchronize(device);
  }
  state.counters["score_bytes"] = 0;
}

void unfused(benchmark::State& state, Device device) {
  Inputs in(static_cast<std::size_t>(state.range(0)), device);
  const std::size_t s = in.seq, d = kHeadDim, ss = s * s, sd = s * d;
  const std::size_t scores = kHeads * ss;
  Buffer x(scores, DType::f32, device), p(scores, DType::f32, device);
  Buffer dp(scores, DType::f32, device), ds(scores, DType::f32, device);
  for (auto _ : state) {
    k::gemm_batched(false, true, kHeads, s, s, d, 1.0, in.q, sd, in.kk, sd, 0.0, x, ss);
    k::softmax_forward(x, s, p, true, kScale);
    k::gemm_batched(false, false, kHeads, s, d, s, 1.0, p, ss, in.v, sd, 0.0, in.o, sd);
    k::gemm_batched(true, false, kHeads, s, d, s, 1.0, p, ss, in.dout, sd, 0.0, in.dv, sd);
    k::gemm_batched(false, true, kHeads, s, s, d, 1.0, in.dout, sd, in.v, sd, 0.0, dp, ss);
    k::softmax_backward(p, dp, s, ds, kScale);
    k::gemm_batched(false, false, kHeads, s, d, s, 1.0, ds, ss, in.kk, sd, 0.0, in.dq, sd);
    k::gemm_batched(true, false, kHeads, s, d, s, 1.0, ds, ss, in.q, sd, 0.0, in.dk, sd);
    k::synchronize(device);
  }
  state.counters["score_bytes"] = static_cast<double>(4 * scores * sizeof(float));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  return mpitron::bench::run_benchmarks(argc, argv, [] {
    mpitron::bench::register_on_devices("attention_fused", fused, sizes);
    mpitron::bench::register_on_devices("attention_unfused", unfused, sizes);
  });
}
