#include "app/validate/host_reference.h"

#include <algorithm>
#include <cmath>

namespace mpitron::app {

using V = std::vector<double>;

HostValues central_difference_vjp(const HostFunction& f, const HostValues& inputs, const V& dy) {
  HostValues grads;
  HostValues x = inputs;
  for (std::size_t j = 0; j < x.size(); ++j) {
    grads.emplace_back(x[j].size(), 0.0);
    for (std::size_t i = 0; i < x[j].size(); ++i) {
      const double x0 = x[j][i];
      if (!std::isfinite(x0)) continue;
      const double h = 1e-6 * std::max(1.0, std::abs(x0));
      x[j][i] = x0 + h;
      const V plus = f(x);
      x[j][i] = x0 - h;
      const V minus = f(x);
      x[j][i] = x0;
      double g = 0.0;
      for (std::size_t k = 0; k < dy.size(); ++k)
        g += dy[k] * (plus[k] - minus[k]);
      grads[j][i] = g / (2.0 * h);
    }
  }
  return grads;
}

V uniform_values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  V v(n);
  std::uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (double& x : v) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
  }
  return v;
}

V softmax_rows(const V& x, std::size_t cols) {
  V y(x.size());
  for (std::size_t r = 0; r < x.size() / cols; ++r) {
    double top = -kInfinity, total = 0.0;
    for (std::size_t c = 0; c < cols; ++c)
      top = std::max(top, x[r * cols + c]);
    for (std::size_t c = 0; c < cols; ++c)
      total += y[r * cols + c] = std::exp(x[r * cols + c] - top);
    for (std::size_t c = 0; c < cols; ++c)
      y[r * cols + c] /= total;
  }
  return y;
}

namespace {

// Calls visit(at, p) for every (batch, head, query) row: at(m, row, d) is element d of the head's
// slice of row `row` of m, p the row's probabilities over the seq keys.
template <class Visit>
void for_each_attention_row(const V& q, const V& k, AttentionSizes z, Visit visit) {
  const std::size_t width = z.heads * z.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(z.head_dim));
  for (std::size_t b = 0; b < z.batch; ++b)
    for (std::size_t h = 0; h < z.heads; ++h) {
      const auto at = [&, b, h ](auto& m, std::size_t row, std::size_t d) -> auto& {
        return m[(b * z.seq + row) * width + h * z.head_dim + d];
      };
      for (std::size_t i = 0; i < z.seq; ++i) {
        V scores(z.seq, 0.0);
        for (std::size_t j = 0; j < z.seq; ++j) {
          for (std::size_t d = 0; d < z.head_dim; ++d)
            scores[j] += at(q, i, d) * at(k, j, d);
          scores[j] = z.causal && j > i ? -kInfinity : scores[j] * scale;
        }
        visit(at, i, softmax_rows(scores, z.seq));
      }
    }
}

}  // namespace

V attention_reference(const V& q, const V& k, const V& v, AttentionSizes z) {
  V out(q.size(), 0.0);
  for_each_attention_row(q, k, z, [&](auto at, std::size_t i, const V& p) {
    for (std::size_t j = 0; j < z.seq; ++j)
      for (std::size_t d = 0; d < z.head_dim; ++d)
        at(out, i, d) += p[j] * at(v, j, d);
  });
  return out;
}

HostValues attention_reference_vjp(const V& q, const V& k, const V& v, const V& dy,
                                   AttentionSizes z) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(z.head_dim));
  HostValues grads(3, V(q.size(), 0.0));
  V& dq = grads[0];
  V& dk = grads[1];
  V& dv = grads[2];
  for_each_attention_row(q, k, z, [&](auto at, std::size_t i, const V& p) {
    V dp(z.seq, 0.0);
    double row_dot = 0.0;
    for (std::size_t j = 0; j < z.seq; ++j) {
      for (std::size_t d = 0; d < z.head_dim; ++d) {
        dp[j] += at(dy, i, d) * at(v, j, d);
        at(dv, j, d) += p[j] * at(dy, i, d);
      }
      row_dot += p[j] * dp[j];
    }
    for (std::size_t j = 0; j < z.seq; ++j) {
      const double ds = p[j] * (dp[j] - row_dot) * scale;
      for (std::size_t d = 0; d < z.head_dim; ++d) {
        at(dq, i, d) += ds * at(k, j, d);
        at(dk, j, d) += ds * at(q, i, d);
      }
    }
  });
  return grads;
}

}  // namespace mpitron::app
