// weight_operand's bfloat16 copies, keyed by the parameter's shared state: a scope's own, or
// those a Bf16WeightCopies keeps between scopes.
#include "autograd/weight_operands.h"

#include <unordered_map>

#include "autograd/ops.h"
#include "kernels/ops.h"

namespace mpitron::autograd {

struct Bf16WeightCopies::Entries {
  struct Copy {
    Tensor weight;  // keeps the parameter's state, the key, alive while the copy is kept
    Tensor operand;
    bool current = true;     // rounded in the open scope (false: a kept copy of an earlier one)
    bool refreshed = false;  // written with the parameter since the last scope (mark_refreshed)
  };
  std::unordered_map<const TensorImpl*, Copy> copies;
};

namespace {

// The copies of the open Bf16WeightScope, or null outside one.
Bf16WeightCopies::Entries* open_copies = nullptr;

}  // namespace

Bf16WeightCopies::Bf16WeightCopies() : entries_(std::make_unique<Entries>()) {}

Bf16WeightCopies::~Bf16WeightCopies() = default;

Bf16WeightCopies::Bf16WeightCopies(Bf16WeightCopies&&) noexcept = default;

Bf16WeightCopies& Bf16WeightCopies::operator=(Bf16WeightCopies&&) noexcept = default;

Tensor Bf16WeightCopies::kept_copy(const Tensor& weight) const {
  const auto found = entries_->copies.find(weight.impl().get());
  return found == entries_->copies.end() ? Tensor() : found->second.operand;
}

void Bf16WeightCopies::mark_refreshed(const Tensor& weight) {
  const auto found = entries_->copies.find(weight.impl().get());
  if (found != entries_->copies.end()) found->second.refreshed = true;
}

Bf16WeightScope::Bf16WeightScope() : owner_(open_copies == nullptr) {
  if (!owner_) return;
  own_ = std::make_unique<Bf16WeightCopies::Entries>();
  open_copies = own_.get();
}

Bf16WeightScope::Bf16WeightScope(Bf16WeightCopies& keep) : owner_(open_copies == nullptr) {
  if (!owner_) return;
  for (auto& [key, copy] : keep.entries_->copies) {
    copy.current = copy.refreshed;
    copy.refreshed = false;
  }
  open_copies = keep.entries_.get();
}

Bf16WeightScope::~Bf16WeightScope() {
  if (owner_) open_copies = nullptr;
}

Tensor weight_operand(const Tensor& weight) {
  if (open_copies == nullptr || kernels::gemm_operands() != kernels::GemmOperands::bfloat16 ||
      weight.dtype() != DType::f32 || !weight.is_leaf() || !weight.requires_grad()) {
    return gemm_operand(weight);
  }
  const auto found = open_copies->copies.find(weight.impl().get());
  if (found == open_copies->copies.end()) {
    Tensor operand = gemm_operand(weight);
    open_copies->copies.emplace(weight.impl().get(),
                                Bf16WeightCopies::Entries::Copy{weight, operand});
    return operand;
  }
  Bf16WeightCopies::Entries::Copy& copy = found->second;
  if (!copy.current) {  // the bits gemm_operand gives, into the kept buffer
    kernels::convert(weight.buffer(), copy.operand.buffer());
    copy.current = true;
  }
  return copy.operand;
}

}  // namespace mpitron::autograd
