#include "nn/wording.h"

namespace mpitron::nn {

std::string counted(std::int64_t n, std::string_view singular, std::string_view plural) {
  std::string text = std::to_string(n) + " ";
  if (n == 1) return text.append(singular);
  if (plural.empty()) return text.append(singular).append("s");
  return text.append(plural);
}

}  // namespace mpitron::nn
