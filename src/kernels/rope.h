// The inverse frequencies of rotary position embedding (RoPE): the base theta, and Llama 3's
// rope_scaling of type "llama3", which slows the low-frequency pairs down so that a model
// trained on short contexts reads long ones. Written once for the CPU loops and the CUDA kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>

#include "kernels/math.h"

namespace mpitron::kernels {

/// Llama 3's rope_scaling of type "llama3" (Meta's Llama 3.1 reference code, apply_scaling;
/// Hugging Face transformers' _compute_llama3_parameters). With the unscaled inverse frequency
/// f of a pair and its wavelength w = 2 pi / f, the low band L = original_max_positions /
/// low_freq_factor and the high band H = original_max_positions / high_freq_factor:
///   w < H:        f (high frequencies are kept);
///   w > L:        f / factor;
///   otherwise:    (1 - s) f / factor + s f, s = (original_max_positions / w - low_freq_factor)
///                 / (high_freq_factor - low_freq_factor) (a smooth blend between the two).
/// factor 0 means no scaling. Llama 3.1 and 3.2: factor 8 or 32, low 1, high 4, original 8192.
struct Llama3RopeScaling {
  double factor = 0.0;  ///< 0: no scaling; otherwise >= 1
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_positions = 8192.0;  ///< original_max_position_embeddings, in tokens

  bool active() const { return factor != 0.0; }
  bool operator==(const Llama3RopeScaling& o) const {
    return factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor &&
           original_max_positions == o.original_max_positions;
  }
  bool operator!=(const Llama3RopeScaling& o) const { return !(*this == o); }
};

/// RoPE's frequencies: pair i < head_dim / 2 of a head turns by theta^(-2 i / head_dim)
/// radians per position (Su et al., "RoFormer", arXiv:2104.09864, sec. 3.2), rescaled by
/// `scaling` when it is active. Converts implicitly from a bare theta (no scaling).
struct RopeFrequencies {
  double theta = 10000.0;  ///< the base: Llama 2 10000, Llama 3 500000
  Llama3RopeScaling scaling;

  RopeFrequencies(double theta = 10000.0, Llama3RopeScaling scaling = {})  // NOLINT: implicit
      : theta(theta), scaling(scaling) {}

  /// The inverse frequency of pair i, in radians per position, computed in double.
  MPITRON_HOST_DEVICE double inverse_frequency(std::size_t i, std::size_t head_dim) const {
    using std::pow;
    const double f = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (scaling.factor == 0.0) return f;
    const double two_pi = 6.283185307179586476925286766559;
    const double wavelength = two_pi / f;
    const double high_band = scaling.original_max_positions / scaling.high_freq_factor;
    const double low_band = scaling.original_max_positions / scaling.low_freq_factor;
    if (wavelength < high_band) return f;
    if (wavelength > low_band) return f / scaling.factor;
    const double s = (scaling.original_max_positions / wavelength - scaling.low_freq_factor) /
                     (scaling.high_freq_factor - scaling.low_freq_factor);
    return (1.0 - s) * f / scaling.factor + s * f;
  }
};

/// The first rule `rope` breaks, or nothing: theta a finite number > 0; an active scaling's
/// factor >= 1, 0 < low_freq_factor < high_freq_factor and original_max_positions > 0, all
/// finite. The message names the value ("rope_scaling factor 0.5 is not a finite number >= 1").
std::optional<std::string> rope_error(const RopeFrequencies& rope);

}  // namespace mpitron::kernels
