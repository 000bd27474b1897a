// Helpers of the packed GEMM tests (test_packed_gemm.cpp, test_bf16_gemm.cpp).
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace mpitron::test {

/// One row-major product C[m, n] = op(A) op(B): A stored [m, k] ([k, m] when trans_a), B stored
/// [k, n] ([n, k] when trans_b), both without padding.
struct GemmCase {
  std::size_t m, n, k;
  bool trans_a, trans_b;
};

/// `count` floats uniform in [-1, 1), a fixed sequence per seed (std::mt19937).
inline std::vector<float> uniform_floats(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v)
    x = dist(rng);
  return v;
}

}  // namespace mpitron::test
