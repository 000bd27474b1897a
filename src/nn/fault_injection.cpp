#include "nn/fault_injection.h"

#include <array>
#include <stdexcept>
#include <utility>

namespace mpitron::nn {

namespace {
Fault active = Fault::none;

constexpr std::array<std::pair<const char*, Fault>, 6> kNames{{
    {"none", Fault::none},
    {"copy-to-tp-no-all-reduce", Fault::copy_to_tp_no_all_reduce},
    {"row-bias-every-rank", Fault::row_bias_every_rank},
    {"dp-sum-not-average", Fault::dp_sum_not_average},
    {"pp-gradient-not-sent", Fault::pp_gradient_not_sent},
    {"replica-drift", Fault::replica_drift},
}};
}  // namespace

Fault parse_fault(const std::string& name) {
  for (const auto& [spelling, fault] : kNames) {
    if (name == spelling) return fault;
  }
  throw std::invalid_argument("unknown fault '" + name + "'");
}

void inject_fault(Fault fault) {
  active = fault;
}

bool fault_active(Fault fault) {
  return active == fault;
}

}  // namespace mpitron::nn
