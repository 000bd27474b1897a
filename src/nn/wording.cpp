#include "nn/wording.h"

#include <fmt/format.h>

#include <cmath>

namespace mpitron::nn {

std::string counted(std::int64_t n, std::string_view singular, std::string_view plural) {
  std::string text = std::to_string(n) + " ";
  if (n == 1) return text.append(singular);
  if (plural.empty()) return text.append(singular).append("s");
  return text.append(plural);
}

std::string value_text(double x) {
  return std::isnan(x) ? std::string("NaN") : fmt::format("{}", x);
}

}  // namespace mpitron::nn
