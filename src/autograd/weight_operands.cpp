// weight_operand's per-scope bfloat16 copies, keyed by the parameter's shared state.
#include "autograd/weight_operands.h"

#include <memory>
#include <unordered_map>

#include "autograd/ops.h"

namespace mpitron::autograd {
namespace {

struct Copy {
  Tensor weight;  // keeps the parameter's state, the key, alive while the copy is kept
  Tensor operand;
};

using Copies = std::unordered_map<const TensorImpl*, Copy>;

// The copies of the open Bf16WeightScope, or null outside one.
std::unique_ptr<Copies> open_copies;

}  // namespace

Bf16WeightScope::Bf16WeightScope() : owner_(open_copies == nullptr) {
  if (owner_) open_copies = std::make_unique<Copies>();
}

Bf16WeightScope::~Bf16WeightScope() {
  if (owner_) open_copies.reset();
}

Tensor weight_operand(const Tensor& weight) {
  if (open_copies == nullptr || kernels::gemm_operands() != kernels::GemmOperands::bfloat16 ||
      weight.dtype() != DType::f32 || !weight.is_leaf() || !weight.requires_grad()) {
    return gemm_operand(weight);
  }
  const auto found = open_copies->find(weight.impl().get());
  if (found != open_copies->end()) return found->second.operand;
  Tensor operand = gemm_operand(weight);
  open_copies->emplace(weight.impl().get(), Copy{weight, operand});
  return operand;
}

}  // namespace mpitron::autograd
