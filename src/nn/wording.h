// Words of user-facing messages (nn and app): counted nouns ("1 rank", "2 ranks") and values
// that may not be finite.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mpitron::nn {

/// "<n> <singular>" when n is 1, else "<n> <plural>"; `plural` defaults to singular + "s".
std::string counted(std::int64_t n, std::string_view singular, std::string_view plural = {});

/// "NaN" for any NaN (whatever its sign), "inf" or "-inf" for infinities, else fmt's shortest
/// round-trip text of x: how a non-finite loss or logit is named in errors.
std::string value_text(double x);

}  // namespace mpitron::nn
