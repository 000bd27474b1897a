// The analytical gradients of validate's float64 attention reference (app/validate/
// host_reference.h) against central differences of the same reference, at the sizes validate's
// KERNELS check uses them and at several heads, plain and causal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "app/validate/host_reference.h"

namespace mpitron::app {
namespace {

// max over every element of |analytical - differences|, relative to max(1, max |differences|).
double relative_gap(const HostValues& analytical, const HostValues& differences) {
  double gap = 0.0, scale = 1.0;
  for (std::size_t j = 0; j < differences.size(); ++j) {
    EXPECT_EQ(analytical[j].size(), differences[j].size());
    for (std::size_t i = 0; i < differences[j].size(); ++i) {
      gap = std::max(gap, std::abs(analytical[j][i] - differences[j][i]));
      scale = std::max(scale, std::abs(differences[j][i]));
    }
  }
  return gap / scale;
}

// Central differences are good to about 1e-9 here (h = 1e-6, smooth functions of inputs of
// order 1); a wrong or missing term of the analytical formula is off by 1e-2 and more.
constexpr double kAgreement = 1e-7;

HostValues attention_inputs(AttentionSizes z, std::uint64_t seed) {
  const std::size_t n = z.batch * z.seq * z.heads * z.head_dim;
  return {uniform_values(n, -2.0, 2.0, seed), uniform_values(n, -2.0, 2.0, seed + 1),
          uniform_values(n, -2.0, 2.0, seed + 2)};
}

void expect_vjp_matches_differences(AttentionSizes z, const HostValues& in) {
  const std::vector<double> dy = uniform_values(in[0].size(), -1.0, 1.0, 7);
  const HostFunction f = [z](const HostValues& x) {
    return attention_reference(x[0], x[1], x[2], z);
  };
  EXPECT_LT(relative_gap(attention_reference_vjp(in[0], in[1], in[2], dy, z),
                         central_difference_vjp(f, in, dy)),
            kAgreement);
}

TEST(HostReference, AttentionVjpMatchesCentralDifferences) {
  for (const bool causal : {false, true}) {
    for (const AttentionSizes z :
         {AttentionSizes{2, 3, 2, 2, causal}, AttentionSizes{2, 5, 2, 3, causal},
          AttentionSizes{3, 1, 1, 5, causal}}) {
      SCOPED_TRACE(testing::Message()
                   << "batch " << z.batch << " seq " << z.seq << " heads " << z.heads
                   << " head_dim " << z.head_dim << " causal " << causal);
      expect_vjp_matches_differences(z, attention_inputs(z, 11));
    }
  }
}

// validate's two-block case: seq 66, keys from 64 on much larger, so the largest scores of a row
// lie in its last keys.
TEST(HostReference, AttentionVjpMatchesCentralDifferencesAtTwoKeyBlocks) {
  const AttentionSizes z{1, 66, 1, 3, true};
  HostValues in = attention_inputs(z, 21);
  for (double& q : in[0])
    q = 1.0 + q / 4.0;
  for (std::size_t i = 64 * 3; i < in[1].size(); ++i)
    in[1][i] = 4.5 + in[1][i] / 6.0;
  expect_vjp_matches_differences(z, in);
}

TEST(HostReference, AttentionOfOneKeyIsItsValue) {
  const std::vector<double> q{0.3, -1.0}, k{2.0, 0.5}, v{-4.0, 7.0};
  EXPECT_EQ(attention_reference(q, k, v, {1, 1, 1, 2, true}), v);
  const HostValues grads = attention_reference_vjp(q, k, v, {1.0, -2.0}, {1, 1, 1, 2, true});
  EXPECT_EQ(grads[0], (std::vector<double>{0.0, 0.0}));  // one key: p = 1 whatever the scores
  EXPECT_EQ(grads[1], (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(grads[2], (std::vector<double>{1.0, -2.0}));
}

}  // namespace
}  // namespace mpitron::app
