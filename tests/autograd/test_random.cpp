// Seeded tensor creation: determinism (element i depends only on (seed, i)) and the sample
// statistics of 100k draws.
//
// Statistical bounds: every bound below is 6 standard errors of the statistic for n = 100000
// independent draws of a correct generator. A correct generator exceeds 6 sigma with probability
// ~2e-9 per statistic, so for any seed the test passes; a wrong scale, shift or distribution
// (e.g. std 0.98 instead of 1, or uniform mistaken for normal) moves a statistic by tens of
// standard errors and fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "autograd/random.h"
#include "autograd_test_support.h"

namespace mpitron::test {
using namespace ::mpitron::autograd;
namespace {

constexpr std::int64_t kSamples = 100000;
constexpr double kSigmas = 6.0;
// Where the ziggurat's tail sampler takes over from its base strip (r of 256 layers).
constexpr double kTail = 3.6541528853610088;

double sample_mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sample_std(const std::vector<double>& v) {
  const double m = sample_mean(v);
  double squares = 0.0;
  for (const double x : v)
    squares += (x - m) * (x - m);
  return std::sqrt(squares / static_cast<double>(v.size() - 1));
}

// Fraction of samples with |x| < limit.
double fraction_within(const std::vector<double>& v, double limit) {
  const auto inside =
      std::count_if(v.begin(), v.end(), [&](double x) { return std::abs(x) < limit; });
  return static_cast<double>(inside) / static_cast<double>(v.size());
}

// Pearson correlation of v[i] and w[i].
double correlation(const std::vector<double>& v, const std::vector<double>& w) {
  const double mv = sample_mean(v), mw = sample_mean(w);
  double cov = 0.0, vv = 0.0, ww = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    cov += (v[i] - mv) * (w[i] - mw);
    vv += (v[i] - mv) * (v[i] - mv);
    ww += (w[i] - mw) * (w[i] - mw);
  }
  return cov / std::sqrt(vv * ww);
}

TEST(Random, SameSeedSameValuesOtherSeedOtherValues) {
  const auto a = randn({64}, 7, 1.0, DType::f64).to_vector();
  EXPECT_EQ(a, randn({64}, 7, 1.0, DType::f64).to_vector());
  const auto b = randn({64}, 8, 1.0, DType::f64).to_vector();
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NE(a[i], b[i]) << "at " << i;
  EXPECT_EQ(uniform({64}, 7, -1.0, 1.0).to_vector(), uniform({64}, 7, -1.0, 1.0).to_vector());
}

TEST(Random, ElementDependsOnlyOnSeedAndIndex) {
  // The same flat index gives the same value whatever the shape or total size, so a shard of a
  // master tensor can be generated or sliced interchangeably.
  const auto big = randn({40, 25}, 99, 0.5, DType::f64).to_vector();
  const auto flat = randn({1000}, 99, 0.5, DType::f64).to_vector();
  const auto prefix = randn({3, 7}, 99, 0.5, DType::f64).to_vector();
  EXPECT_EQ(big, flat);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), big.begin()));
  const auto u_big = uniform({500}, 5, 2.0, 3.0, DType::f64).to_vector();
  const auto u_prefix = uniform({10, 5}, 5, 2.0, 3.0, DType::f64).to_vector();
  EXPECT_TRUE(std::equal(u_prefix.begin(), u_prefix.end(), u_big.begin()));
}

TEST(Random, Float32IsTheRoundedFloat64Stream) {
  const auto f64 = randn({256}, 3, 1.0, DType::f64).to_vector();
  const auto f32 = randn({256}, 3, 1.0, DType::f32).to_vector();
  for (std::size_t i = 0; i < f64.size(); ++i) {
    EXPECT_EQ(f32[i], static_cast<double>(static_cast<float>(f64[i]))) << "at " << i;
  }
}

TEST(Random, NormalMeanStdAndShape) {
  const double sd = 0.02;  // the usual weight-init scale
  const auto v = randn({kSamples}, 2024, sd, DType::f64).to_vector();
  const double n = static_cast<double>(kSamples);
  // Standard errors: mean sigma/sqrt(n); std sigma/sqrt(2n) (normal data); a fraction p has
  // sqrt(p(1-p)/n).
  EXPECT_NEAR(sample_mean(v), 0.0, kSigmas * sd / std::sqrt(n));
  EXPECT_NEAR(sample_std(v), sd, kSigmas * sd / std::sqrt(2.0 * n));
  for (const auto& [k, p] :
       {std::pair{1.0, 0.682689492137086}, std::pair{2.0, 0.954499736103642}}) {
    EXPECT_NEAR(fraction_within(v, k * sd), p, kSigmas * std::sqrt(p * (1.0 - p) / n))
        << "within " << k << " sigma";
  }
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }));
}

TEST(Random, NormalDistributionFunctionAndTails) {
  // 10^6 standard normals against Phi. Kolmogorov-Smirnov: by the Dvoretzky-Kiefer-Wolfowitz
  // inequality (Massart's constant) P(sqrt(n) D > t) <= 2 exp(-2 t^2), 2e-9 at t = 3.22 for any
  // n. The tails: |x| > 3 and |x| > r = kTail, each fraction within 6 standard errors of
  // erfc(k / sqrt 2); and the mean of |x| past r within 6 standard errors of the truncated
  // normal's, lambda = phi(r) / Q(r) with variance 1 + r lambda - lambda^2.
  constexpr std::int64_t kMany = 1000000;
  auto v = randn({kMany}, 31, 1.0, DType::f64).to_vector();
  const double n = static_cast<double>(kMany);
  for (const double k : {3.0, kTail}) {
    const double p = std::erfc(k / std::sqrt(2.0));
    EXPECT_NEAR(1.0 - fraction_within(v, k), p, kSigmas * std::sqrt(p * (1.0 - p) / n))
        << "beyond " << k;
  }
  std::vector<double> tail;
  for (const double x : v)
    if (std::abs(x) >= kTail) tail.push_back(std::abs(x));
  const double lambda = std::exp(-kTail * kTail / 2.0) / std::sqrt(2.0 * std::numbers::pi) /
                        (0.5 * std::erfc(kTail / std::sqrt(2.0)));
  const double tail_variance = 1.0 + kTail * lambda - lambda * lambda;
  EXPECT_NEAR(sample_mean(tail), lambda,
              kSigmas * std::sqrt(tail_variance / static_cast<double>(tail.size())));
  // Excess kurtosis: standard error sqrt(24 / n).
  const double fourth = std::accumulate(v.begin(), v.end(), 0.0,
                                        [](double a, double x) { return a + x * x * x * x; });
  EXPECT_NEAR(fourth / n - 3.0, 0.0, kSigmas * std::sqrt(24.0 / n));
  std::sort(v.begin(), v.end());
  // Chi-square over 100 equiprobable bins (edges Phi^-1(k / 100) by bisection): 99 degrees of
  // freedom, mean 99, standard deviation sqrt(198); P(chi2 > 99 + 6 sqrt(198) = 183) is about
  // 6e-7 (Wilson-Hilferty).
  constexpr int kBins = 100;
  double chi2 = 0.0;
  std::size_t below = 0;
  for (int bin = 1; bin <= kBins; ++bin) {
    double lo = -10.0, hi = 10.0;  // Phi(edge) = bin / kBins
    for (int step = 0; step < 80 && bin < kBins; ++step) {
      const double mid = 0.5 * (lo + hi);
      (0.5 * std::erfc(-mid / std::sqrt(2.0)) < static_cast<double>(bin) / kBins ? lo : hi) = mid;
    }
    const std::size_t upto =
        bin == kBins
            ? v.size()
            : static_cast<std::size_t>(std::lower_bound(v.begin(), v.end(), lo) - v.begin());
    const double expected = n / kBins, observed = static_cast<double>(upto - below);
    chi2 += (observed - expected) * (observed - expected) / expected;
    below = upto;
  }
  EXPECT_LT(chi2, 99.0 + kSigmas * std::sqrt(198.0));
  double d = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double phi = 0.5 * std::erfc(-v[i] / std::sqrt(2.0));
    d = std::max({d, phi - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - phi});
  }
  EXPECT_LT(d, 3.22 / std::sqrt(n));
}

TEST(Random, NormalJustPastTheTailStart) {
  // The base strip of the ziggurat ends at 3.906 > r = 3.654: its part past r belongs to the tail
  // sampler. Draws with r <= |x| < r + 0.05 (probability 4.6e-5) within 6 standard errors at
  // 4 x 10^6 draws (about 180 expected); the base strip's own share of [r, 3.69), taken by a fast
  // path with the next layer's ratio, would add about 100.
  constexpr std::int64_t kMany = 4000000;
  constexpr double kWidth = 0.05;
  const auto v = randn({kMany}, 41, 1.0, DType::f64).to_vector();
  const double n = static_cast<double>(kMany);
  const double p = std::erfc(kTail / std::sqrt(2.0)) - std::erfc((kTail + kWidth) / std::sqrt(2.0));
  const auto near = std::count_if(v.begin(), v.end(), [&](double x) {
    return std::abs(x) >= kTail && std::abs(x) < kTail + kWidth;
  });
  EXPECT_NEAR(static_cast<double>(near) / n, p, kSigmas * std::sqrt(p * (1.0 - p) / n));
}

TEST(Random, NeighboursAndSeedsAreUncorrelated) {
  // The correlation of n independent pairs has standard error 1/sqrt(n).
  const auto v = randn({kSamples + 1}, 11, 1.0, DType::f64).to_vector();
  const std::vector<double> head(v.begin(), v.end() - 1), tail(v.begin() + 1, v.end());
  const double bound = kSigmas / std::sqrt(static_cast<double>(kSamples));
  EXPECT_NEAR(correlation(head, tail), 0.0, bound);
  const auto w = randn({kSamples + 1}, 12, 1.0, DType::f64).to_vector();
  EXPECT_NEAR(correlation(v, w), 0.0, bound);
}

TEST(Random, UniformRangeMeanAndStd) {
  const double low = -3.0, high = 5.0, width = high - low;
  const auto v = uniform({kSamples}, 77, low, high, DType::f64).to_vector();
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [&](double x) { return x >= low && x < high; }));
  const double n = static_cast<double>(kSamples);
  // U(low, high): variance w^2/12, fourth central moment w^4/80. Standard errors: mean
  // w/sqrt(12 n); std sqrt((mu4 - sigma^4) / n) / (2 sigma) (delta method).
  const double sigma = width / std::sqrt(12.0);
  const double mu4 = std::pow(width, 4) / 80.0;
  EXPECT_NEAR(sample_mean(v), (low + high) / 2.0, kSigmas * sigma / std::sqrt(n));
  EXPECT_NEAR(sample_std(v), sigma,
              kSigmas * std::sqrt((mu4 - std::pow(sigma, 4)) / n) / (2.0 * sigma));
}

TEST(Random, UniformRejectsAnEmptyRangeAndArangeCounts) {
  EXPECT_THROW(uniform({4}, 1, 1.0, 0.0), std::invalid_argument);
  EXPECT_THROW(uniform({4}, 1, 0.0, 1.0, DType::i32), std::invalid_argument);
  EXPECT_THROW(randn({4}, 1, 1.0, DType::i64), std::invalid_argument);
  EXPECT_EQ(arange(5, DType::f64).to_vector(), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(0).shape(), Shape{0});
}

// The values do not depend on the device they are created on.
class RandomOnDevice : public AutogradTest {};

TEST_P(RandomOnDevice, SameValuesAsOnTheHost) {
  EXPECT_EQ(randn({33}, 5, 1.0, DType::f32, device()).to_vector(),
            randn({33}, 5, 1.0, DType::f32).to_vector());
  EXPECT_EQ(uniform({33}, 5, 0.0, 1.0, DType::f64, device()).to_vector(),
            uniform({33}, 5, 0.0, 1.0, DType::f64).to_vector());
}

INSTANTIATE_TEST_SUITE_P(Devices, RandomOnDevice, ::mpitron::test::all_devices(),
                         ::mpitron::test::device_dtype_name);

}  // namespace
}  // namespace mpitron::test
