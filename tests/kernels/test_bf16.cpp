// bfloat16 conversions (kernels/bf16.h, cpu/bf16_convert.h, kernels::convert) against rules
// written here independently of the implementation's integer trick:
// - a table of edge cases with their expected bits worked out by hand (ties to even both ways,
//   NaN sign and payload, +-inf, the largest finite bfloat16 0x7F7F and the values that round
//   to inf, float32 and bfloat16 denormals, +-0);
// - the numeric rule: of the two bfloat16 values around x, the nearer one by distance computed
//   exactly in double, the even one on a tie, infinity past the largest finite one's upper
//   midpoint (on every upper half 0x0000-0xFFFF with 16 lower halves each);
// - the bit rule: the kept half plus one when the dropped half is above 0x8000, or equal with
//   an odd kept half, on every one of the 2^32 float32 bit patterns, through the vector loop and
//   the scalar function both.
// And the rejection of bfloat16 by every op that does not take it, with errors naming it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention_math.h"
#include "kernels/bf16.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/device.h"
#include "kernels/ops.h"

namespace mpitron::test {
namespace {

using kernels::bf16;
using kernels::Buffer;
using kernels::Device;
using kernels::DType;

std::uint16_t round_bits(std::uint32_t u) {
  return kernels::float_to_bf16_bits(kernels::bits_float(u));
}

struct Edge {
  std::uint32_t in;
  std::uint16_t out;
  const char* what;
};

// Worked out by hand from the rule at the top of kernels/bf16.h.
const Edge kEdges[] = {
    {0x00000000u, 0x0000u, "+0"},
    {0x80000000u, 0x8000u, "-0"},
    {0x3F800000u, 0x3F80u, "1 exactly"},
    {0x3F807FFFu, 0x3F80u, "just below the midpoint: down"},
    {0x3F808000u, 0x3F80u, "tie between 0x3F80 and 0x3F81: to the even 0x3F80 (down)"},
    {0x3F808001u, 0x3F81u, "just above the midpoint: up"},
    {0x3F818000u, 0x3F82u, "tie between 0x3F81 and 0x3F82: to the even 0x3F82 (up)"},
    {0xBF808000u, 0xBF80u, "negative tie: to the even magnitude (down)"},
    {0xBF818000u, 0xBF82u, "negative tie: to the even magnitude (up)"},
    {0x3FFF8000u, 0x4000u, "a tie that carries into the exponent: 2"},
    {0x7F7F0000u, 0x7F7Fu, "the largest finite bfloat16"},
    {0x7F7F7FFFu, 0x7F7Fu, "just below its upper midpoint: stays finite"},
    {0x7F7F8000u, 0x7F80u, "its upper midpoint: a tie to the even 0x7F80, +inf"},
    {0x7F7FFFFFu, 0x7F80u, "FLT_MAX: +inf"},
    {0xFF7F8000u, 0xFF80u, "the negative midpoint: -inf"},
    {0xFF7F7FFFu, 0xFF7Fu, "just above the negative midpoint: the lowest finite"},
    {0x7F800000u, 0x7F80u, "+inf"},
    {0xFF800000u, 0xFF80u, "-inf"},
    {0x7FC00000u, 0x7FC0u, "the quiet NaN"},
    {0xFFC00000u, 0xFFC0u, "the negative quiet NaN: sign kept"},
    {0x7F800001u, 0x7FC0u, "a signalling NaN with its payload in the dropped bits: quiet, not inf"},
    {0xFF800001u, 0xFFC0u, "the same, negative"},
    {0x7FA12345u, 0x7FE1u, "a signalling NaN: the upper payload kept, made quiet"},
    {0x7FFFFFFFu, 0x7FFFu, "the NaN of all ones: no carry into the sign"},
    {0x00000001u, 0x0000u, "the smallest float32 denormal: to +0"},
    {0x80000001u, 0x8000u, "the smallest negative denormal: to -0"},
    {0x00008000u, 0x0000u, "a denormal tie: to the even 0x0000"},
    {0x00008001u, 0x0001u, "above a denormal midpoint: the smallest bfloat16 denormal"},
    {0x00018000u, 0x0002u, "a denormal tie: to the even 0x0002"},
    {0x007F7FFFu, 0x007Fu, "a float32 denormal to the largest bfloat16 denormal"},
    {0x007FFFFFu, 0x0080u, "the largest float32 denormal: up to the smallest normal"},
    {0x00800000u, 0x0080u, "the smallest float32 normal"},
};

TEST(Bf16Convert, EdgeCasesHaveTheStatedBits) {
  std::vector<float> in;
  for (const Edge& e : kEdges) {
    EXPECT_EQ(round_bits(e.in), e.out) << std::hex << e.in << ": " << e.what;
    in.push_back(kernels::bits_float(e.in));
  }
  // The vector loop on the same values, placed where whole vectors and the tail both see them.
  for (const std::size_t offset : {std::size_t{0}, std::size_t{5}}) {
    std::vector<float> padded(offset, 0.0f);
    padded.insert(padded.end(), in.begin(), in.end());
    std::vector<bf16> out(padded.size());
    kernels::cpu::round_to_bf16(padded.data(), out.data(), padded.size());
    for (std::size_t i = 0; i < in.size(); ++i)
      EXPECT_EQ(out[offset + i].bits, kEdges[i].out) << kEdges[i].what << " (vector loop)";
  }
}

// The value of a bfloat16 from its fields, in double: (-1)^s 2^(e - 127) (1 + f / 128) for a
// normal, (-1)^s 2^-126 f / 128 for a denormal.
double bf16_value(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 7) & 0xFF, fraction = bits & 0x7F;
  const double magnitude = exponent == 0 ? std::ldexp(fraction / 128.0, -126)
                                         : std::ldexp(1.0 + fraction / 128.0, exponent - 127);
  return sign != 0 ? -magnitude : magnitude;
}

TEST(Bf16Convert, EveryBf16WidensExactlyToItsValue) {
  for (std::uint32_t bits = 0; bits <= 0xFFFFu; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float x = kernels::bf16_to_float(bf16{h});
    if (((h >> 7) & 0xFF) == 0xFF) {  // inf and NaN keep every bit
      EXPECT_EQ(kernels::float_bits(x), bits << 16);
      continue;
    }
    ASSERT_EQ(static_cast<double>(x), bf16_value(h)) << std::hex << bits;
    ASSERT_EQ(std::signbit(x), (h >> 15) != 0) << std::hex << bits;
  }
  std::vector<bf16> all(0x10000);
  for (std::uint32_t bits = 0; bits <= 0xFFFFu; ++bits)
    all[bits] = bf16{static_cast<std::uint16_t>(bits)};
  std::vector<float> widened(all.size());
  kernels::cpu::widen_bf16(all.data(), widened.data(), all.size());
  for (std::uint32_t bits = 0; bits <= 0xFFFFu; ++bits)
    ASSERT_EQ(kernels::float_bits(widened[bits]), bits << 16) << std::hex << bits;
}

// The numeric rule for a non-NaN x: the nearer of the bfloat16 values below and above |x| (the
// one above the largest finite value counts as 2^128, and is inf), by exact double distances.
std::uint16_t nearest_by_distance(std::uint32_t u) {
  const float x = kernels::bits_float(u);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const auto toward_zero = static_cast<std::uint16_t>((u >> 16) & 0x7FFFu);
  if (toward_zero == 0x7F80u) return static_cast<std::uint16_t>(sign | 0x7F80u);  // inf
  const auto away = static_cast<std::uint16_t>(toward_zero + 1);
  const double magnitude = std::fabs(static_cast<double>(x));
  const double below = bf16_value(toward_zero);
  const double above = away == 0x7F80u ? std::ldexp(1.0, 128) : bf16_value(away);
  const double down = magnitude - below, up = above - magnitude;
  const bool round_up = up < down || (up == down && (away & 1u) == 0);
  return static_cast<std::uint16_t>(sign | (round_up ? away : toward_zero));
}

TEST(Bf16Convert, RoundsToTheNearestValueTiesToEvenForEveryUpperHalf) {
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x0002, 0x1234, 0x3FFF, 0x4000, 0x7FFE, 0x7FFF,
                                0x8000, 0x8001, 0x8002, 0xA5A5, 0xBFFF, 0xC000, 0xFFFE, 0xFFFF};
  for (std::uint32_t high = 0; high <= 0xFFFFu; ++high) {
    if ((high & 0x7F80u) == 0x7F80u && (high & 0x7Fu) != 0) continue;  // NaN: the edge table
    for (const std::uint32_t low : lows) {
      const std::uint32_t u = high << 16 | low;
      if ((high & 0x7FFFu) == 0x7F80u && low != 0) continue;  // NaN as well
      ASSERT_EQ(round_bits(u), nearest_by_distance(u)) << std::hex << u;
    }
  }
}

// Every float32 bit pattern, in blocks that stay in L2: the vector loop, the scalar function and
// the float32-to-float32 rounding (round_to_bf16_values: the rule's bits in the upper half, zeros
// below) against the bit rule (written without branches, so that it vectorizes too). About 6 s in a
// Release build on a Zen 3 core shared with two other builds.
TEST(Bf16Convert, AllFloat32BitPatternsFollowTheBitRuleInTheVectorLoopAndTheScalarFunction) {
  constexpr std::uint32_t kBlock = 1u << 14;
  std::vector<float> in(kBlock);
  std::vector<std::uint16_t> want(kBlock), scalar(kBlock);
  std::vector<bf16> vector(kBlock);
  std::vector<std::uint32_t> values(kBlock), want_values(kBlock);
  float* const in_data = in.data();  // plain pointers: the rule's loop vectorizes
  std::uint16_t* const want_data = want.data();
  for (std::uint64_t first = 0; first < (std::uint64_t{1} << 32); first += kBlock) {
    const auto base = static_cast<std::uint32_t>(first);
    for (std::uint32_t i = 0; i < kBlock; ++i) {
      const std::uint32_t u = base + i, high = u >> 16, low = u & 0xFFFFu;
      const std::uint32_t nan = 0u - static_cast<std::uint32_t>((u & 0x7FFFFFFFu) > 0x7F800000u);
      const std::uint32_t up = static_cast<std::uint32_t>(low > 0x8000u) |
                               (static_cast<std::uint32_t>(low == 0x8000u) & high);
      in_data[i] = std::bit_cast<float>(u);
      want_data[i] =
          static_cast<std::uint16_t>(((high + (up & 1u)) & ~nan) | ((high | 0x0040u) & nan));
    }
    kernels::cpu::round_to_bf16(in.data(), vector.data(), kBlock);
    kernels::cpu::round_to_bf16_values(in.data(), reinterpret_cast<float*>(values.data()), kBlock);
    for (std::uint32_t i = 0; i < kBlock; ++i) {
      scalar[i] = kernels::float_to_bf16_bits(in[i]);
      want_values[i] = std::uint32_t{want[i]} << 16;
    }
    if (std::memcmp(vector.data(), want.data(), kBlock * sizeof(bf16)) == 0 && scalar == want &&
        values == want_values) {
      continue;
    }
    for (std::uint32_t i = 0; i < kBlock; ++i) {
      ASSERT_TRUE(vector[i].bits == want[i] && scalar[i] == want[i] && values[i] == want_values[i])
          << std::hex << "float32 0x" << base + i << ": vector 0x" << vector[i].bits
          << ", scalar 0x" << scalar[i] << ", float32 0x" << values[i] << ", rule 0x" << want[i];
    }
  }
}

// add_bf16 on every bfloat16 a beside partners that reach each branch: itself (doubling, so the
// largest finite values overflow to inf), its negation (exact zeros), a scrambled pattern, the
// smallest denormals and normal of both signs (denormal sums, which VCVTNEPS2BF16 would flush),
// the largest finite value, -inf, a NaN and 1. Against the float32 sum of the two widenings
// rounded by the scalar rule, bit for bit except that a NaN sum may come out as any NaN (which
// operand's payload an add keeps is the compiler's choice); over 65541 elements, so the vector
// loops and the scalar tail both run, and once more in place (out = a).
TEST(Bf16Convert, AddRoundsTheFloat32SumOnceForEveryBfloat16) {
  const std::uint16_t fixed[] = {0x0001, 0x8001, 0x0080, 0x8080, 0x7F7F, 0xFF80, 0x7FC1, 0x3F80};
  std::vector<bf16> a(0x10005);
  for (std::size_t i = 0; i < a.size(); ++i)
    a[i] = bf16{static_cast<std::uint16_t>(i * 40503u)};
  const auto partners = [&](std::size_t kind) {
    std::vector<bf16> b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::uint16_t x = a[i].bits;
      b[i] = bf16{kind == 0   ? x
                  : kind == 1 ? static_cast<std::uint16_t>(x ^ 0x8000u)
                  : kind == 2 ? static_cast<std::uint16_t>(x * 7919u + 12345u)
                              : fixed[kind - 3]};
    }
    return b;
  };
  for (std::size_t kind = 0; kind < 3 + std::size(fixed); ++kind) {
    const std::vector<bf16> b = partners(kind);
    std::vector<bf16> out(a.size()), in_place = a;
    kernels::cpu::add_bf16(a.data(), b.data(), out.data(), a.size());
    kernels::cpu::add_bf16(in_place.data(), b.data(), in_place.data(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      const float sum = kernels::bf16_to_float(a[i]) + kernels::bf16_to_float(b[i]);
      const std::uint16_t want = kernels::float_to_bf16_bits(sum);
      const auto matches = [&](bf16 got) {
        return std::isnan(sum) ? std::isnan(kernels::bf16_to_float(got)) : got.bits == want;
      };
      ASSERT_TRUE(matches(out[i]) && matches(in_place[i]))
          << std::hex << "0x" << a[i].bits << " + 0x" << b[i].bits << ": 0x" << out[i].bits
          << " (in place 0x" << in_place[i].bits << "), the rule 0x" << want;
    }
  }
}

Buffer bf16_buffer(const std::vector<std::uint16_t>& bits) {
  Buffer buffer(bits.size(), DType::bf16, Device::cpu);
  for (std::size_t i = 0; i < bits.size(); ++i)
    buffer.data_as<bf16>()[i] = bf16{bits[i]};
  return buffer;
}

TEST(Bf16Convert, ConvertRoundTripsThroughBuffersOnEveryThreadCount) {
  const int before = kernels::cpu_threads();
  // More than one chunk of parallel.h, so the threads split the work.
  const std::size_t n = 3 * 16384 + 7;
  Buffer f(n, DType::f32, Device::cpu), back(n, DType::f32, Device::cpu);
  for (std::size_t i = 0; i < n; ++i)
    f.data_as<float>()[i] =
        std::ldexp(static_cast<float>(i % 977) - 488.3f, static_cast<int>(i % 61) - 30);
  std::vector<std::uint16_t> want(n);
  for (std::size_t i = 0; i < n; ++i)
    want[i] = kernels::float_to_bf16_bits(f.data_as<float>()[i]);
  for (const int threads : {1, 3}) {
    kernels::set_cpu_threads(threads);
    Buffer h(n, DType::bf16, Device::cpu);
    kernels::convert(f, h);
    kernels::convert(h, back);
    Buffer in_place = f.clone();
    kernels::round_to_bf16(in_place, in_place);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(h.data_as<bf16>()[i].bits, want[i]) << i << " at " << threads << " threads";
      ASSERT_EQ(kernels::float_bits(back.data_as<float>()[i]), static_cast<std::uint32_t>(want[i])
                                                                   << 16);
      ASSERT_EQ(kernels::float_bits(in_place.data_as<float>()[i]),
                static_cast<std::uint32_t>(want[i]) << 16);
    }
  }
  kernels::set_cpu_threads(before);
}

// math::attention_operand, which the CUDA attention applies to P, dS and dO where they enter a
// product under bfloat16 inputs, rounds as the CPU attention's tiles are rounded (kernels::
// round_to_bf16 over a buffer, the vector loop), and leaves every value of a float32 or float64
// attention as it is.
TEST(Bf16Convert, AttentionOperandsRoundOnlyUnderBfloat16Inputs) {
  const std::size_t n = 4099;
  Buffer x(n, DType::f32, Device::cpu);
  for (std::size_t i = 0; i < n; ++i)
    x.data_as<float>()[i] =
        std::ldexp(1.0f + static_cast<float>(i) / 4096.0f, static_cast<int>(i % 9) - 4);
  Buffer rounded = x.clone();
  kernels::round_to_bf16(rounded, rounded);
  std::size_t changed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x.data_as<float>()[i];
    ASSERT_EQ(kernels::float_bits(kernels::math::attention_operand<bf16>(v)),
              kernels::float_bits(rounded.data_as<float>()[i]))
        << i;
    ASSERT_EQ(kernels::float_bits(kernels::math::attention_operand<float>(v)),
              kernels::float_bits(v));
    ASSERT_EQ(kernels::math::attention_operand<double>(static_cast<double>(v) / 3.0),
              static_cast<double>(v) / 3.0);
    changed += rounded.data_as<float>()[i] != v;
  }
  EXPECT_GT(changed, n / 2) << "most of these values need more than bfloat16's 8 bits";
}

TEST(Bf16Convert, CudaGivesTheCpuBits) {
  if (!kernels::cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::vector<float> values;
  for (const Edge& e : kEdges)
    values.push_back(kernels::bits_float(e.in));
  Buffer f(values.size(), DType::f32, Device::cpu);
  std::memcpy(f.data(), values.data(), f.bytes());
  const Buffer on_gpu = f.to(Device::cuda);
  Buffer h(values.size(), DType::bf16, Device::cuda);
  kernels::convert(on_gpu, h);
  Buffer widened(values.size(), DType::f32, Device::cuda);
  kernels::convert(h, widened);
  Buffer rounded(values.size(), DType::f32, Device::cuda);
  kernels::round_to_bf16(on_gpu, rounded);
  const Buffer host = h.to(Device::cpu), host_widened = widened.to(Device::cpu),
               host_rounded = rounded.to(Device::cpu);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(host.data_as<bf16>()[i].bits, kEdges[i].out) << kEdges[i].what;
    EXPECT_EQ(kernels::float_bits(host_widened.data_as<float>()[i]),
              static_cast<std::uint32_t>(kEdges[i].out) << 16);
    EXPECT_EQ(kernels::float_bits(host_rounded.data_as<float>()[i]),
              static_cast<std::uint32_t>(kEdges[i].out) << 16);
  }
}

// `run` throws std::invalid_argument whose message holds `needle`.
template <class F>
void expect_invalid(F run, const std::string& needle) {
  try {
    run();
    ADD_FAILURE() << "no exception; expected one naming '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Bf16Dtype, HasTwoBytesAndItsName) {
  EXPECT_EQ(kernels::dtype_size(DType::bf16), 2u);
  EXPECT_EQ(kernels::to_string(DType::bf16), "bfloat16");
  EXPECT_FALSE(kernels::is_floating(DType::bf16));
  Buffer h(5, DType::bf16, Device::cpu);
  EXPECT_EQ(h.bytes(), 10u);
  EXPECT_THROW(h.data_as<float>(), std::logic_error);
  const Buffer copy = h.clone();
  EXPECT_EQ(copy.dtype(), DType::bf16);
}

// copy_rows only moves elements, so it takes bfloat16 (comm's gather/scatter tiles use it):
// rows [0, 1] and [2, 3] of the source land at stride 3 in the destination, bit for bit.
TEST(Bf16Dtype, CopyRowsMovesItsBits) {
  const Buffer src = bf16_buffer({0x3F80, 0x4000, 0x7FC1, 0x0001});
  Buffer dst = bf16_buffer({0, 0, 0, 0, 0, 0});
  kernels::copy_rows(src, 0, 2, dst, 1, 3, 2, 2);
  const auto* bits = static_cast<const std::uint16_t*>(dst.data());
  EXPECT_EQ(std::vector<std::uint16_t>(bits, bits + 6),
            (std::vector<std::uint16_t>{0, 0x3F80, 0x4000, 0, 0x7FC1, 0x0001}));
}

TEST(Bf16Dtype, OpsThatDoNotTakeItSayBfloat16) {
  Buffer h = bf16_buffer({0x3F80, 0x4000, 0x4040, 0x4080});
  Buffer h2 = bf16_buffer({0x3F80, 0x4000, 0x4040, 0x4080});
  Buffer out = bf16_buffer({0, 0, 0, 0});
  Buffer f(4, DType::f32, Device::cpu), d(4, DType::f64, Device::cpu);
  kernels::fill(f, 1.0);
  expect_invalid([&] { kernels::fill(h, 1.0); }, "out is bfloat16");
  expect_invalid([&] { kernels::add(h, h2, out); }, "a is bfloat16");
  expect_invalid([&] { kernels::transpose(h, 1, 2, 1, 2, 1, out); }, "x is bfloat16");
  expect_invalid([&] { kernels::gemm(false, false, 2, 2, 2, 1.0, h, h2, 0.0, out); },
                 "a is bfloat16");
  expect_invalid([&] { kernels::convert(f, f); }, "src is float32 and dst float32");
  expect_invalid([&] { kernels::convert(d, h); }, "src is float64 and dst bfloat16");
  expect_invalid([&] { kernels::convert(h, out); }, "src is bfloat16 and dst bfloat16");
  expect_invalid([&] { kernels::gemm_bf16(false, false, 2, 2, 2, 1.0, f, h2, 0.0, out); },
                 "a is float32, expected bfloat16");
  expect_invalid([&] { kernels::gemm_bf16(false, false, 2, 2, 2, 1.0, h, h2, 0.0, d); },
                 "c is float64, expected float32 or bfloat16");
  expect_invalid([&] { kernels::gemm_bf16(false, false, 2, 2, 2, 1.0, h, h2, 0.0, h); },
                 "c may not alias a");
  expect_invalid([&] { kernels::gemm_bf16(false, false, 2, 1, 2, 1.0, h, h2, 0.0, f); },
                 "b has 4 elements, expected 2");
  Buffer indices = bf16_buffer({0, 1});
  Buffer table(4, DType::f32, Device::cpu), rows(4, DType::f32, Device::cpu);
  expect_invalid([&] { kernels::embedding_forward(table, 2, indices, 0, rows); },
                 "indices is cpu bfloat16, expected int32 or int64");
}

}  // namespace
}  // namespace mpitron::test
