#include "nn/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace mpitron::nn {

const char* to_string(LrDecayStyle style) {
  switch (style) {
    case LrDecayStyle::linear:
      return "linear";
    case LrDecayStyle::constant:
      return "constant";
    case LrDecayStyle::cosine:
      break;
  }
  return "cosine";
}

LrDecayStyle lr_decay_style_from_string(const std::string& name) {
  for (const LrDecayStyle style :
       {LrDecayStyle::cosine, LrDecayStyle::linear, LrDecayStyle::constant}) {
    if (name == to_string(style)) return style;
  }
  throw std::invalid_argument("learning-rate decay style '" + name +
                              "' is not one of: cosine, linear, constant");
}

double LrSchedule::at(std::int64_t step) const {
  if (step <= warmup_steps) {
    return lr * static_cast<double>(step) /
           static_cast<double>(std::max<std::int64_t>(1, warmup_steps));
  }
  const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
  switch (style) {
    case LrDecayStyle::linear:
      return min_lr + (lr - min_lr) * (1.0 - progress);
    case LrDecayStyle::constant:
      return lr;
    case LrDecayStyle::cosine:
      break;
  }
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace mpitron::nn
