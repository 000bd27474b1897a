// nn's view of the test-only fault injection (kernels/fault_injection.h), which lives in the
// lowest layer so that kernels, autograd and comm can hold hooks too.
#pragma once

#include "kernels/fault_injection.h"

namespace mpitron::nn {

using kernels::Fault;
using kernels::fault_active;
using kernels::inject_fault;
using kernels::parse_fault;

}  // namespace mpitron::nn
