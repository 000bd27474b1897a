// Seeded, deterministic tensor creation. Element i of a tensor made from seed s depends only on
// (s, i) — not on the device, the rank, the shape or the thread count — so every rank that
// builds the same master tensor gets the same values and can slice its shard from it.
#pragma once

#include <cstdint>

#include "autograd/tensor.h"

namespace mpitron::autograd {

/// Normal samples with mean 0 and standard deviation `std`: element i is std times a standard
/// normal drawn by the ziggurat method (Marsaglia & Tsang 2000, Doornik's exact form of 2005)
/// from a SplitMix64 sequence (Steele, Lea & Flood, OOPSLA 2014) started at the hash of (seed, i),
/// computed in float64 and rounded to `dtype`: about 4 ns per element on one Zen 4 core
/// (bench/bench_random). The ziggurat's table is computed at start-up with the C library's exp,
/// log and erfc, so builds on C libraries whose results differ in the last bit can differ in the
/// last bits of float64 samples (float32 ones practically never). Not the same stream as
/// torch.randn: PyTorch parity tests read committed values instead. Throws
/// std::invalid_argument for an integer dtype.
Tensor randn(const Shape& shape, std::uint64_t seed, double std = 1.0, DType dtype = DType::f32,
             Device device = Device::cpu);

/// Uniform samples low + (high - low) (1 - u), u in (0, 1] on a grid of 2^-53, from SplitMix64
/// of (seed, index): in [low, high) before rounding; rounding to the dtype (or of the sum) can
/// give high itself (in float32 about once in 2^25 draws over [0, 1)), and high == low gives low.
/// Throws std::invalid_argument when high < low or for an integer dtype.
Tensor uniform(const Shape& shape, std::uint64_t seed, double low, double high,
               DType dtype = DType::f32, Device device = Device::cpu);

/// 0, 1, ..., n-1 as a 1-D tensor of shape {n} (like torch.arange(n)).
Tensor arange(std::int64_t n, DType dtype = DType::f32, Device device = Device::cpu);

}  // namespace mpitron::autograd
