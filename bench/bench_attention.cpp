// Causal attention forward + backward in float32, and fused with q, k, v and o bfloat16 as
// train --bf16 keeps them (arguments: seq, slices = batch x heads, head_dim): one GPT-2 layer's
// heads (12 heads of head_dim 64, one sequence) at seq 256, 1024 and 2048, and one README train
// example layer's micro-batch (4 sequences x 8 heads of head_dim 32 at seq 128). The fused kernels
// (attention_forward / attention_backward: blocked online softmax, key blocks above the diagonal
// skipped, nothing of size [seq, seq] stored) beside the unfused op sequence the references run
// (scores GEMM, causal softmax, P V GEMM; backward dV = P^T dO, dP = dO V^T, softmax backward, dQ =
// dS K, dK = dS^T Q), whose [heads, seq, seq] scores, probabilities and their gradients are the
// counter `score_bytes`.
#include <cmath>
#include <cstdint>

#include "bench_main.h"
#include "kernels/ops.h"

namespace {

using mpitron::kernels::Buffer;
using mpitron::kernels::Device;
using mpitron::kernels::DType;
namespace k = mpitron::kernels;

struct Inputs {
  std::size_t seq, heads, head_dim, n;
  double scale;
  Buffer q, kk, v, dout, o, dq, dk, dv;

  Inputs(const benchmark::State& state, Device device)
      : seq(static_cast<std::size_t>(state.range(0))),
        heads(static_cast<std::size_t>(state.range(1))),
        head_dim(static_cast<std::size_t>(state.range(2))),
        n(heads * seq * head_dim),
        scale(1.0 / std::sqrt(static_cast<double>(head_dim))),
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

void fused(benchmark::State& state, Device device) {
  Inputs in(state, device);
  Buffer lse(in.heads * in.seq, DType::f32, device);
  for (auto _ : state) {
    k::attention_forward(in.q, in.kk, in.v, in.seq, in.head_dim, true, in.scale, in.o, lse);
    k::attention_backward(in.q, in.kk, in.v, in.o, lse, in.dout, in.seq, in.head_dim, true,
                          in.scale, in.dq, in.dk, in.dv);
    k::synchronize(device);
  }
  state.counters["score_bytes"] = 0;
}

// The fused kernels on bfloat16 q, k, v and o (float32 lse, dout and gradients), the inputs
// rounded from the float32 ones.
void fused_bf16(benchmark::State& state, Device device) {
  Inputs in(state, device);
  Buffer lse(in.heads * in.seq, DType::f32, device);
  Buffer q(in.n, DType::bf16, device), kk(in.n, DType::bf16, device);
  Buffer v(in.n, DType::bf16, device), o(in.n, DType::bf16, device);
  k::convert(in.q, q);
  k::convert(in.kk, kk);
  k::convert(in.v, v);
  for (auto _ : state) {
    k::attention_forward(q, kk, v, in.seq, in.head_dim, true, in.scale, in.o, lse);
    k::convert(in.o, o);
    k::attention_backward(q, kk, v, o, lse, in.dout, in.seq, in.head_dim, true, in.scale, in.dq,
                          in.dk, in.dv);
    k::synchronize(device);
  }
  state.counters["score_bytes"] = 0;
}

void unfused(benchmark::State& state, Device device) {
  Inputs in(state, device);
  const std::size_t s = in.seq, d = in.head_dim, heads = in.heads, ss = s * s, sd = s * d;
  const std::size_t scores = heads * ss;
  Buffer x(scores, DType::f32, device), p(scores, DType::f32, device);
  Buffer dp(scores, DType::f32, device), ds(scores, DType::f32, device);
  for (auto _ : state) {
    k::gemm_batched(false, true, heads, s, s, d, 1.0, in.q, sd, in.kk, sd, 0.0, x, ss);
    k::softmax_forward(x, s, p, true, in.scale);
    k::gemm_batched(false, false, heads, s, d, s, 1.0, p, ss, in.v, sd, 0.0, in.o, sd);
    k::gemm_batched(true, false, heads, s, d, s, 1.0, p, ss, in.dout, sd, 0.0, in.dv, sd);
    k::gemm_batched(false, true, heads, s, s, d, 1.0, in.dout, sd, in.v, sd, 0.0, dp, ss);
    k::softmax_backward(p, dp, s, ds, in.scale);
    k::gemm_batched(false, false, heads, s, d, s, 1.0, ds, ss, in.kk, sd, 0.0, in.dq, sd);
    k::gemm_batched(true, false, heads, s, d, s, 1.0, ds, ss, in.q, sd, 0.0, in.dk, sd);
    k::synchronize(device);
  }
  state.counters["score_bytes"] = static_cast<double>(4 * scores * sizeof(float));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seq", "slices", "head_dim"});
  for (const std::int64_t seq : {256, 1024, 2048})
    b->Args({seq, 12, 64});
  b->Args({128, 32, 32})->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  return mpitron::bench::run_benchmarks(argc, argv, [] {
    mpitron::bench::register_on_devices("attention_fused", fused, sizes);
    mpitron::bench::register_on_devices("attention_fused_bf16", fused_bf16, sizes);
    mpitron::bench::register_on_devices("attention_unfused", unfused, sizes);
  });
}
