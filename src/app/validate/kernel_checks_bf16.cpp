#include "app/validate/kernel_checks_bf16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "app/validate/host_reference.h"
#include "kernels/bf16.h"
#include "kernels/ops.h"

namespace mpitron::app {
namespace {

using kernels::bf16;
using kernels::Buffer;
using kernels::Device;
using kernels::DType;

float float_of_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

std::uint32_t bits_of_float(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The bfloat16 bits of x by arithmetic in double: x / ulp rounded to an integer by
// std::nearbyint (ties to even in the default rounding mode) times ulp, where ulp = 2^(e - 7)
// for the exponent e of x (at least -126, the denormals' one); 2^128 and beyond is inf.
std::uint16_t bf16_by_arithmetic(float x) {
  const std::uint32_t u = bits_of_float(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const double magnitude = std::fabs(static_cast<double>(x));
  double rounded = magnitude;
  if (magnitude != 0.0 && std::isfinite(magnitude)) {
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(magnitude), -126) - 7);
    rounded = std::nearbyint(magnitude / ulp) * ulp;
  }
  const float value = rounded >= std::ldexp(1.0, 128) ? INFINITY : static_cast<float>(rounded);
  return static_cast<std::uint16_t>((bits_of_float(value) >> 16) | ((u >> 16) & 0x8000u));
}

std::vector<float> conversion_inputs() {
  std::vector<float> in;
  for (const std::uint32_t high :
       {0x0000u, 0x0001u, 0x0002u, 0x007Fu, 0x0080u, 0x3F80u, 0x3F81u, 0x3FFFu, 0x7F7Eu, 0x7F7Fu}) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      for (const std::uint32_t sign : {0u, 0x80000000u})
        in.push_back(float_of_bits(sign | high << 16 | low));
    }
  }
  for (const std::uint32_t special : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
                                      0x7F800001u, 0xFF800001u, 0x7FA12345u, 0x7FFFFFFFu})
    in.push_back(float_of_bits(special));
  return in;
}

// C = op(A) op(B) of one case of check_bf16_gemm, and what it is compared with.
struct Bf16Product {
  bool trans_a, trans_b;
  DType c_dtype;
  double beta;
};

}  // namespace

LocalCheck check_bf16_conversion(const ValidateContext& ctx) {
  LocalCheck check{
      "KERNELS: bfloat16 conversion (ties to even, NaN, inf, overflow, denormals, +-0) matches the "
      "rounding rule bit for bit",
      Comparison(Tolerance{0.0, 0.0, 0.0}), ""};
  const std::vector<float> in = conversion_inputs();
  Buffer host(in.size(), DType::f32, Device::cpu);
  std::memcpy(host.data(), in.data(), host.bytes());
  const Buffer source = host.to(ctx.device);
  Buffer rounded(in.size(), DType::bf16, ctx.device), widened(in.size(), DType::f32, ctx.device);
  kernels::convert(source, rounded);
  kernels::convert(rounded, widened);
  const Buffer got = rounded.to(Device::cpu), got_widened = widened.to(Device::cpu);
  std::vector<double> actual, expected, actual_widened, expected_widened;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint16_t bits = got.data_as<bf16>()[i].bits;
    actual.push_back(bits);
    expected.push_back(bf16_by_arithmetic(in[i]));
    actual_widened.push_back(bits_of_float(got_widened.data_as<float>()[i]));
    expected_widened.push_back(static_cast<double>(static_cast<std::uint32_t>(bits) << 16));
  }
  check.comparison.expect_close(actual, expected);
  check.comparison.expect_close(actual_widened, expected_widened);
  return check;
}

LocalCheck check_bf16_gemm(const ValidateContext& ctx) {
  LocalCheck check{
      "KERNELS: bfloat16 GEMM (float32 and bfloat16 C, accumulate, transposes) within the "
      "float32-accumulation bound of float64 reference",
      Comparison(Tolerance{0.0, 1.0, 1.0}), ""};
  constexpr std::size_t m = 13, n = 33, k = 257;
  const double u = std::ldexp(1.0, ctx.device == Device::cuda ? -23 : -24);
  const double r = static_cast<double>(k + (k + 255) / 256 + 2);
  const double gamma = r * u / (1.0 - r * u) + static_cast<double>(k) * std::ldexp(1.0, -53);
  std::vector<bf16> a(m * k), b(k * n);
  std::vector<double> old_c = uniform_values(m * n, -1.0, 1.0, ctx.seed + 202);
  const std::vector<double> a_values = uniform_values(a.size(), -1.0, 1.0, ctx.seed + 200);
  const std::vector<double> b_values = uniform_values(b.size(), -1.0, 1.0, ctx.seed + 201);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = kernels::to_bf16(static_cast<float>(a_values[i]));
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = kernels::to_bf16(static_cast<float>(b_values[i]));
  for (double& c : old_c)  // exact in float32 and in bfloat16
    c = kernels::bf16_to_float(kernels::to_bf16(static_cast<float>(c)));
  Buffer host_a(a.size(), DType::bf16, Device::cpu), host_b(b.size(), DType::bf16, Device::cpu);
  std::memcpy(host_a.data(), a.data(), host_a.bytes());
  std::memcpy(host_b.data(), b.data(), host_b.bytes());
  const Buffer device_a = host_a.to(ctx.device), device_b = host_b.to(ctx.device);
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      for (const Bf16Product p : {Bf16Product{trans_a, trans_b, DType::f32, 0.0},
                                  Bf16Product{trans_a, trans_b, DType::f32, 1.0},
                                  Bf16Product{trans_a, trans_b, DType::bf16, 0.0}}) {
        Buffer host_c(m * n, p.c_dtype, Device::cpu);
        for (std::size_t i = 0; i < m * n; ++i) {
          const auto value = static_cast<float>(old_c[i]);
          if (p.c_dtype == DType::f32)
            host_c.data_as<float>()[i] = value;
          else
            host_c.data_as<bf16>()[i] = kernels::to_bf16(value);
        }
        Buffer c = host_c.to(ctx.device);
        kernels::gemm_bf16(p.trans_a, p.trans_b, m, n, k, 1.0, device_a, device_b, p.beta, c);
        const Buffer got = c.to(Device::cpu);
        std::vector<double> ratios, zeros(m * n, 0.0);
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t j = 0; j < n; ++j) {
            double exact = p.beta * old_c[i * n + j], magnitude = 0.0;
            for (std::size_t q = 0; q < k; ++q) {
              const double term = static_cast<double>(kernels::bf16_to_float(
                                      a[p.trans_a ? q * m + i : i * k + q])) *
                                  kernels::bf16_to_float(b[p.trans_b ? j * k + q : q * n + j]);
              exact += term;
              magnitude += std::abs(term);
            }
            double bound = gamma * (magnitude + std::abs(p.beta * old_c[i * n + j]));
            double value = 0.0;
            if (p.c_dtype == DType::f32) {
              value = got.data_as<float>()[i * n + j];
            } else {
              value = kernels::bf16_to_float(got.data_as<bf16>()[i * n + j]);
              bound = bound * (1.0 + std::ldexp(1.0, -8)) + std::ldexp(std::abs(exact), -8);
            }
            ratios.push_back(std::abs(value - exact) / bound);
          }
        }
        check.comparison.expect_close(ratios, zeros);
      }
    }
  }
  return check;
}

}  // namespace mpitron::app
