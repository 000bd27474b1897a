#include "app/report/idle_share.h"

#include <fmt/format.h>

#include <stdexcept>

namespace mpitron::app {

std::vector<double> mean_by_stage(const std::vector<double>& by_rank, int tp, int pp) {
  const auto group = static_cast<std::size_t>(tp) * static_cast<std::size_t>(pp);
  if (tp < 1 || pp < 1 || by_rank.empty() || by_rank.size() % group != 0) {
    throw std::invalid_argument(fmt::format(
        "mean_by_stage: {} ranks do not split into tp {} x pp {}", by_rank.size(), tp, pp));
  }
  std::vector<double> sums(static_cast<std::size_t>(pp), 0.0);
  for (std::size_t rank = 0; rank < by_rank.size(); ++rank)
    sums[rank / static_cast<std::size_t>(tp) % static_cast<std::size_t>(pp)] += by_rank[rank];
  const double per_stage = static_cast<double>(by_rank.size() / static_cast<std::size_t>(pp));
  for (double& sum : sums)
    sum /= per_stage;
  return sums;
}

std::string percentages(const std::vector<double>& fractions) {
  std::string text;
  for (const double f : fractions)
    text += fmt::format("{}{:.0f} %", text.empty() ? "" : ", ", 100.0 * f);
  return text;
}

}  // namespace mpitron::app
