// Counted nouns in user-facing messages: "1 rank", "2 ranks" (nn and app).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mpitron::nn {

/// "<n> <singular>" when n is 1, else "<n> <plural>"; `plural` defaults to singular + "s".
std::string counted(std::int64_t n, std::string_view singular, std::string_view plural = {});

}  // namespace mpitron::nn
