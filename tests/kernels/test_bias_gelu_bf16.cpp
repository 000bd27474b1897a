// bias_gelu_bf16 and its backward against the kernels they fuse (convert, bias_add,
// gelu_forward / gelu_forward_backward, convert), bit for bit on the CPU at 1 and 3 threads, with
// rows longer than one widened block and a ragged tail; on a GPU within a bfloat16 ulp of the
// CPU's (its erf and tanh are CUDA's, not erf_f32's); and their argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::test {
namespace {

using kernels::Buffer;
using kernels::Device;
using kernels::DType;
using kernels::GeluForm;

constexpr std::size_t kRows = 7, kCols = 600;  // two 256-element blocks and a tail of 88

Buffer floats(std::size_t n, double scale, int seed) {
  Buffer b(n, DType::f32, Device::cpu);
  for (std::size_t i = 0; i < n; ++i)
    b.data_as<float>()[i] = static_cast<float>(
        scale * std::sin(0.37 * static_cast<double>(i) + seed * 1.3 + 0.01 * i * seed));
  return b;
}

Buffer bf16_of(const Buffer& f) {
  Buffer h(f.numel(), DType::bf16, f.device());
  kernels::convert(f, h);
  return h;
}

bool same_bits(const Buffer& a, const Buffer& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() &&
         std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

struct Inputs {
  Buffer pre = bf16_of(floats(kRows * kCols, 4.0, 1));
  Buffer bias = floats(kCols, 0.5, 2);
  Buffer dg = floats(kRows * kCols, 1.0, 3);
};

// What the fused kernels replace: pre widened, biased, then GELU (and its derivative times dg)
// in float32, G rounded.
struct Composed {
  Buffer g, dy;
};

Composed composed(const Inputs& in, GeluForm form) {
  Buffer y(kRows * kCols, DType::f32, Device::cpu), g(kRows * kCols, DType::f32, Device::cpu);
  kernels::convert(in.pre, y);
  kernels::bias_add(y, in.bias, kCols, y);
  Buffer dy = in.dg.clone();
  kernels::gelu_forward_backward(y, dy, g, dy, form);
  return {bf16_of(g), std::move(dy)};
}

TEST(BiasGeluBf16, HasTheBitsOfTheKernelsItFusesOnEveryThreadCount) {
  const int before = kernels::cpu_threads();
  const Inputs in;
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    const Composed want = composed(in, form);
    Buffer forward_want(kRows * kCols, DType::f32, Device::cpu);
    kernels::convert(in.pre, forward_want);
    kernels::bias_add(forward_want, in.bias, kCols, forward_want);
    kernels::gelu_forward(forward_want, forward_want, form);
    const Buffer forward_g = bf16_of(forward_want);
    for (const int threads : {1, 3}) {
      SCOPED_TRACE(std::string(form == GeluForm::exact ? "exact" : "tanh") + " at " +
                   std::to_string(threads) + " threads");
      kernels::set_cpu_threads(threads);
      Buffer g(kRows * kCols, DType::bf16, Device::cpu);
      kernels::bias_gelu_bf16(in.pre, in.bias, kCols, g, form);
      EXPECT_TRUE(same_bits(g, forward_g));
      Buffer dg = in.dg.clone(), g_back(kRows * kCols, DType::bf16, Device::cpu);
      kernels::bias_gelu_backward_bf16(in.pre, in.bias, kCols, dg, g_back, form);
      EXPECT_TRUE(same_bits(g_back, want.g));
      EXPECT_TRUE(same_bits(dg, want.dy));
    }
  }
  kernels::set_cpu_threads(before);
}

// CUDA's erff and tanhf are not erf_f32 and tanh_f32: G within one bfloat16 rounding of the
// CPU's (2^-8 relative, plus 1e-6 near GELU's zero), dY within 1e-5 relative plus 1e-6.
TEST(BiasGeluBf16, CudaIsWithinABfloat16UlpOfTheCpu) {
  if (!kernels::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Inputs in;
  for (const GeluForm form : {GeluForm::exact, GeluForm::tanh}) {
    const Composed want = composed(in, form);
    Buffer g(kRows * kCols, DType::bf16, Device::cuda), g_back = g.clone();
    Buffer dg = in.dg.to(Device::cuda);
    kernels::bias_gelu_bf16(in.pre.to(Device::cuda), in.bias.to(Device::cuda), kCols, g, form);
    kernels::bias_gelu_backward_bf16(in.pre.to(Device::cuda), in.bias.to(Device::cuda), kCols, dg,
                                     g_back, form);
    const Buffer host_g = g.to(Device::cpu), host_back = g_back.to(Device::cpu),
                 host_dy = dg.to(Device::cpu);
    for (std::size_t i = 0; i < kRows * kCols; ++i) {
      const float cpu_g = kernels::bf16_to_float(want.g.data_as<kernels::bf16>()[i]);
      const float cpu_dy = want.dy.data_as<float>()[i];
      for (const Buffer* b : {&host_g, &host_back}) {
        const float gpu_g = kernels::bf16_to_float(b->data_as<kernels::bf16>()[i]);
        ASSERT_LE(std::fabs(gpu_g - cpu_g), std::ldexp(std::fabs(cpu_g), -8) + 1e-6f) << i;
      }
      ASSERT_LE(std::fabs(host_dy.data_as<float>()[i] - cpu_dy), 1e-5f * std::fabs(cpu_dy) + 1e-6f)
          << i;
    }
  }
}

// `run` throws std::invalid_argument whose message holds every needle.
template <class F>
void expect_invalid(F run, const std::vector<std::string>& needles) {
  try {
    run();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    for (const std::string& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BiasGeluBf16, RefusesOtherDtypesAndSizesNamingThem) {
  const Inputs in;
  Buffer g(kRows * kCols, DType::bf16, Device::cpu);
  Buffer g32(kRows * kCols, DType::f32, Device::cpu);
  Buffer dg = in.dg.clone();
  const Buffer pre32 = floats(kRows * kCols, 1.0, 4);
  expect_invalid([&] { kernels::bias_gelu_bf16(pre32, in.bias, kCols, g, GeluForm::exact); },
                 {"kernels::bias_gelu_bf16", "pre is float32, expected bfloat16"});
  expect_invalid([&] { kernels::bias_gelu_bf16(in.pre, in.bias, kCols, g32, GeluForm::exact); },
                 {"g is float32, expected bfloat16"});
  expect_invalid(
      [&] { kernels::bias_gelu_bf16(in.pre, bf16_of(in.bias), kCols, g, GeluForm::exact); },
      {"bias is bfloat16, expected float32"});
  expect_invalid([&] { kernels::bias_gelu_bf16(in.pre, in.bias, kCols + 1, g, GeluForm::exact); },
                 {"kernels::bias_gelu_bf16", "601"});
  Buffer short_dg(kCols, DType::f32, Device::cpu);
  expect_invalid(
      [&] {
        kernels::bias_gelu_backward_bf16(in.pre, in.bias, kCols, short_dg, g, GeluForm::exact);
      },
      {"kernels::bias_gelu_backward_bf16", "dg", "600"});
  Buffer dg16 = bf16_of(dg);
  expect_invalid(
      [&] { kernels::bias_gelu_backward_bf16(in.pre, in.bias, kCols, dg16, g, GeluForm::tanh); },
      {"dg is bfloat16, expected float32"});
}

}  // namespace
}  // namespace mpitron::test
