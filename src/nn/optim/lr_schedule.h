// The learning-rate schedule of GPT training: linear warmup, then cosine decay (Loshchilov &
// Hutter, "SGDR", arXiv:1608.03983; the nanoGPT / torch_peer_gpt.py form).
#pragma once

#include <cstdint>

namespace mpitron::nn {

struct LrSchedule {
  double lr = 1e-3;               ///< peak learning rate, reached at the end of warmup
  double min_lr = 1e-4;           ///< reached at total_steps
  std::int64_t warmup_steps = 0;  ///< linear warmup from lr/warmup_steps at step 1
  std::int64_t total_steps = 1;   ///< the last step

  /// The learning rate of step `step` (counted from 1): lr * step / warmup_steps during warmup
  /// (step <= warmup_steps), then min_lr + (lr - min_lr) (1 + cos(pi p)) / 2 with
  /// p = (step - warmup_steps) / (total_steps - warmup_steps), clamped to [0, 1].
  double at(std::int64_t step) const;
};

}  // namespace mpitron::nn
