#include "nn/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mpitron::nn {

double LrSchedule::at(std::int64_t step) const {
  if (step <= warmup_steps) {
    return lr * static_cast<double>(step) /
           static_cast<double>(std::max<std::int64_t>(1, warmup_steps));
  }
  const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
  const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace mpitron::nn
