// The learning-rate schedule of GPT training: linear warmup, then a decay to min_lr in one of
// Megatron-LM's --lr-decay-style forms: cosine (Loshchilov & Hutter, "SGDR", arXiv:1608.03983;
// the nanoGPT / torch_peer_gpt.py form), linear, or constant (no decay).
#pragma once

#include <cstdint>
#include <string>

namespace mpitron::nn {

/// How the rate falls from lr to min_lr after warmup.
enum class LrDecayStyle { cosine, linear, constant };

/// "cosine", "linear", "constant"; and back (otherwise std::invalid_argument "learning-rate
/// decay style '<name>' is not one of: cosine, linear, constant").
const char* to_string(LrDecayStyle style);
LrDecayStyle lr_decay_style_from_string(const std::string& name);

struct LrSchedule {
  double lr = 1e-3;               ///< peak learning rate, reached at the end of warmup
  double min_lr = 1e-4;           ///< reached at total_steps (not used by `constant`)
  std::int64_t warmup_steps = 0;  ///< linear warmup from lr/warmup_steps at step 1
  std::int64_t total_steps = 1;   ///< the last step
  LrDecayStyle style = LrDecayStyle::cosine;

  /// The learning rate of step `step` (counted from 1): lr * step / warmup_steps during warmup
  /// (step <= warmup_steps), then with p = (step - warmup_steps) / (total_steps - warmup_steps)
  /// clamped to [0, 1]: cosine min_lr + (lr - min_lr) (1 + cos(pi p)) / 2, linear min_lr +
  /// (lr - min_lr) (1 - p), constant lr.
  double at(std::int64_t step) const;
};

}  // namespace mpitron::nn
