// Helpers shared by the differentiable op implementations (internal to autograd).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/function.h"
#include "autograd/tensor.h"

namespace mpitron::autograd::detail {

/// Throws std::invalid_argument "<op>: ..." unless every defined tensor shares a's device and
/// dtype.
void check_compatible(const char* op, const std::vector<Tensor>& tensors);

/// A new uninitialized tensor with x's device and dtype.
Tensor empty_like(const Tensor& x, const Shape& shape);
inline Tensor empty_like(const Tensor& x) {
  return empty_like(x, x.shape());
}

/// Normalizes a possibly negative dim; throws std::out_of_range naming the op.
int normalize_dim(const char* op, int dim, int ndim);

/// Product of shape[begin, end).
std::size_t extent_product(const Shape& shape, int begin, int end);

/// The gradient a leaf `weight` already has (a view of the data-parallel buffer, in training),
/// into which a backward may add its own gradient in place and then return an undefined tensor
/// (nothing left for the engine to add); undefined for a weight that is not a leaf or has none.
Tensor existing_leaf_grad(const Tensor& weight);

/// dW = dy^T x for weight [out, in], dy [..., out], x [..., in] (float32, or bfloat16: a
/// gemm_operand; matmul_ops.cpp). A leaf weight that already has a gradient gets dW added to it
/// by the GEMM itself (beta = 1) and the result is undefined (nothing left for the engine to
/// add); otherwise a new [out, in] tensor of weight's dtype.
Tensor weight_gradient(const Tensor& dy, const Tensor& x, const Tensor& weight);

/// y [rows, out] (bfloat16) = x_operand W^T for a bfloat16 x_operand [rows, in] and a float32
/// weight W [out, in], rounded to bfloat16 for the product: kernels::gemm_bf16 into a bfloat16
/// C, each element the float32 sum rounded once (linear_bf16_output, fused_mlp's bfloat16
/// pre-activation).
void bf16_product(const Tensor& x_operand, const Tensor& weight, Tensor& y);

/// What a GEMM-backed op keeps of its input x [..., in] for backward: the operand its weight
/// gradient multiplies (gemm_operand(x): under GemmOperands::bfloat16 x's bfloat16 copy, so the
/// float32 x itself need not outlive the forward), x's dtype, and whether x needed a gradient
/// when the op ran (as attach decided).
struct SavedGemmInput {
  Tensor operand;
  DType dtype = DType::f32;
  bool needs_grad = false;
};

/// x's SavedGemmInput with `operand` (gemm_operand(x) or a copy the caller shares).
SavedGemmInput save_gemm_input(const Tensor& x, const Tensor& operand);

/// The gradients of y = x W^T + b from dy [..., out], for x [..., in] (kept as `x`), weight
/// [out, in] and bias [out] (or undefined): {dx = dy W (x's dtype), dW = weight_gradient(dy,
/// x.operand, weight), db = row sums of dy}, each left undefined unless its input needs a
/// gradient. The backward of `linear` and of fused_mlp's first layer (matmul_ops.cpp).
std::vector<Tensor> linear_backward(const Tensor& dy, const SavedGemmInput& x, const Tensor& weight,
                                    const Tensor& bias);

/// What an op whose backward reads only the values of its activation x keeps of it: under
/// kernels::GemmOperands::bfloat16 a float32 x rounded to bfloat16 (gemm_operand: 2 bytes an
/// element, as Megatron-LM's --bf16 keeps its bfloat16 activations), otherwise x detached; and
/// undefined when grad mode is off, since the op then records no backward (and rounds nothing).
/// rms_norm (its input), swiglu and scaled_dot_product_attention (its output) keep theirs so;
/// layer_norm has its kernel write its xhat so (keeps_bf16).
Tensor keep_activation(const Tensor& x);

/// Whether gemm_operand (and so keep_activation) rounds x to bfloat16: under
/// kernels::GemmOperands::bfloat16 and x float32.
bool keeps_bf16(const Tensor& x);

/// A Function whose backward is a lambda: keeps small ops short.
template <class Backward>
class LambdaFunction final : public Function {
 public:
  LambdaFunction(std::string name, Backward backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return (*backward_)(grad_output);
  }
  void release_saved() override { backward_.reset(); }

 private:
  std::string name_;
  std::optional<Backward> backward_;  // its captures are the saved tensors
};

/// attach(output, LambdaFunction(name, backward), inputs) — skipped entirely (no closure kept)
/// when no input needs a gradient.
template <class Backward>
Tensor record(const char* name, Tensor output, std::vector<Tensor> inputs, Backward backward) {
  return attach(std::move(output),
                std::make_shared<LambdaFunction<Backward>>(name, std::move(backward)),
                std::move(inputs));
}

/// True when `t` is defined and will receive a gradient in the current backward pass.
inline bool needs_grad(const Tensor& t) {
  return t.defined() && t.requires_grad();
}

}  // namespace mpitron::autograd::detail
