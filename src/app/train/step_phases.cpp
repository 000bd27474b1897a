#include "app/train/step_phases.h"

#include <fmt/format.h>

#include <array>
#include <tuple>

namespace mpitron::app {

namespace {

// The phases in step order: (JSON key, words, member).
const std::array<std::tuple<const char*, const char*, double nn::StepPhases::*>, 5> kPhases{{
    {"forward_backward", "forward-backward", &nn::StepPhases::forward_backward},
    {"gradient_reduction", "gradient reduction", &nn::StepPhases::gradient_reduction},
    {"gradient_norm", "gradient norm", &nn::StepPhases::gradient_norm},
    {"optimizer", "optimizer", &nn::StepPhases::optimizer},
    {"parameter_all_gather", "parameter all-gather", &nn::StepPhases::parameter_all_gather},
}};

}  // namespace

nlohmann::json phases_ms(const nn::StepPhases& phases) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, words, member] : kPhases)
    json[key] = phases.*member * 1e3;
  return json;
}

void PhaseTotals::add(const nn::StepPhases& phases) {
  for (const auto& [key, words, member] : kPhases)
    sum_.*member += phases.*member;
  ++steps_;
}

nlohmann::json PhaseTotals::mean_ms() const {
  nn::StepPhases mean;
  for (const auto& [key, words, member] : kPhases)
    mean.*member = steps_ > 0 ? sum_.*member / steps_ : 0.0;
  return phases_ms(mean);
}

std::string PhaseTotals::text() const {
  double total = 0.0;
  for (const auto& [key, words, member] : kPhases)
    total += sum_.*member;
  std::string text;
  for (const auto& [key, words, member] : kPhases) {
    const double seconds = sum_.*member;
    if (member == &nn::StepPhases::parameter_all_gather && !parameter_all_gather_) continue;
    text += fmt::format("{}{} {:.1f} ms ({:.0f} %)", text.empty() ? "" : ", ", words,
                        steps_ > 0 ? seconds * 1e3 / steps_ : 0.0,
                        total > 0 ? 100.0 * seconds / total : 0.0);
  }
  return text;
}

}  // namespace mpitron::app
