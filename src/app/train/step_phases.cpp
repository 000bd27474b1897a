#include "app/train/step_phases.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

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

void TrafficTotals::add(const comm::Traffic& before, const comm::Traffic& after) {
  for (const auto& [name, bytes] : comm::traffic_since(before, after))
    sum_[name] += bytes;
  ++steps_;
}

nlohmann::json TrafficTotals::mean_mib() const {
  nlohmann::json mean = nlohmann::json::object();
  for (const auto& [name, bytes] : sum_) {
    if (bytes > 0) mean[name] = static_cast<double>(bytes) / (1024.0 * 1024.0) / steps_;
  }
  return mean;
}

std::string TrafficTotals::text() const {
  std::vector<std::string> parts;
  for (const auto& [name, bytes] : sum_) {
    if (bytes > 0) {
      parts.push_back(fmt::format("{} {:.2f} MiB", name,
                                  static_cast<double>(bytes) / (1024.0 * 1024.0) / steps_));
    }
  }
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace mpitron::app
