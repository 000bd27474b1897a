// The autograd Tensor: a cheap handle to a shaped, device-tagged buffer that records how it was
// computed, so that `backward()` can run reverse-mode differentiation over the recorded graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device.h"

namespace mpitron::autograd {

using kernels::Device;
using kernels::DType;

/// A tensor shape, row-major: e.g. {batch, seq, hidden}. The empty shape {} is a scalar.
using Shape = std::vector<std::int64_t>;

/// Number of elements of `shape` (1 for a scalar). Throws std::invalid_argument on a negative
/// extent.
std::int64_t numel_of(const Shape& shape);

/// "[8, 16, 32]".
std::string to_string(const Shape& shape);

class Function;
struct TensorImpl;

/// A handle to shared tensor state (copying a Tensor copies the handle, like torch.Tensor).
///
/// Storage is contiguous row-major and may be shared between tensors (`detach`, `reshape`).
/// A tensor made by a differentiable op while grad mode is on and some input requires grad has a
/// `grad_fn` and `requires_grad() == true`; tensors made directly (factories, `detach`) are leaves.
/// `backward` accumulates d(root)/d(leaf) into every reachable leaf that requires grad.
class Tensor {
 public:
  /// An undefined tensor (no storage); `defined()` is false. Used for "no gradient".
  Tensor() = default;

  /// Uninitialized storage of `shape`.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  /// All elements equal to `value`.
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  /// Copies `values` (row-major) into a new tensor; throws std::invalid_argument when
  /// values.size() != numel_of(shape), and for an integer dtype when a value is not an integer
  /// representable in it (naming the first such position and value).
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = DType::f32, Device device = Device::cpu);
  /// An int64 tensor holding `values` (row-major), e.g. token ids; throws std::invalid_argument
  /// when values.size() != numel_of(shape).
  static Tensor from_indices(const std::vector<std::int64_t>& values, const Shape& shape,
                             Device device = Device::cpu);
  /// Wraps an existing buffer (taking ownership); throws std::invalid_argument when its numel
  /// differs from numel_of(shape).
  static Tensor from_buffer(kernels::Buffer buffer, const Shape& shape);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  /// Extent of dim `d`; negative `d` counts from the end. Throws std::out_of_range.
  std::int64_t size(int d) const;
  int ndim() const { return static_cast<int>(shape().size()); }
  std::int64_t numel() const;
  Device device() const;
  DType dtype() const;
  kernels::Buffer& buffer();
  const kernels::Buffer& buffer() const;

  bool requires_grad() const;
  /// Marks a leaf as a parameter/input whose gradient `backward` should accumulate. Throws
  /// std::logic_error on a non-leaf and std::invalid_argument when marking an integer tensor.
  Tensor& set_requires_grad(bool requires_grad = true);
  /// The accumulated gradient (same shape); undefined until a backward pass reached this leaf.
  Tensor grad() const;
  /// Replaces the accumulated gradient (undefined clears it). Throws std::invalid_argument on a
  /// shape mismatch.
  void set_grad(const Tensor& grad);
  /// The op that produced this tensor, or null for a leaf.
  const std::shared_ptr<Function>& grad_fn() const;
  bool is_leaf() const { return grad_fn() == nullptr; }

  /// Reverse-mode differentiation from a one-element tensor (seed 1). Throws std::logic_error
  /// when numel() != 1 or the tensor does not require grad.
  void backward() const;
  /// Reverse-mode differentiation seeded with `grad_output` (same shape), e.g. the gradient a
  /// pipeline stage receives from the next stage. Throws std::invalid_argument on a shape, dtype
  /// or device mismatch.
  void backward(const Tensor& grad_output) const;

  /// A leaf sharing this tensor's storage, without grad history.
  Tensor detach() const;
  /// A leaf of `shape` viewing elements [offset, offset + numel_of(shape)) of this tensor's
  /// storage (writes land there; the storage stays alive while the view does), without grad
  /// history. Gradients that live in one flat buffer are such views. Throws std::out_of_range
  /// when the range exceeds numel().
  Tensor flat_view(std::int64_t offset, const Shape& shape) const;
  /// Copies this tensor's elements into `destination` (same shape, dtype and device; e.g. a
  /// flat_view of one flat buffer) and makes `destination`'s storage this tensor's: every handle
  /// of this tensor reads and writes there from now on (tensors made from it earlier by `detach`
  /// or `reshape` keep the old storage). Parameters that live in one flat buffer, as in
  /// Megatron-LM's distributed optimizer, are moved there this way. Throws
  /// std::invalid_argument on a shape, dtype or device mismatch.
  void move_storage_to(const Tensor& destination);

  /// Registers `hook` on a leaf that requires grad: every backward pass calls it once this
  /// leaf's gradient has received its last contribution of the pass (after the last op that
  /// uses the leaf ran its backward), like torch's register_post_accumulate_grad_hook; one hook
  /// per leaf (a new one replaces it; an empty function removes it). Throws std::logic_error on
  /// a non-leaf or a leaf that does not require grad.
  void set_post_accumulate_hook(std::function<void()> hook);
  /// A deep copy on `device` as a leaf (not differentiable).
  Tensor to(Device device) const;
  /// A deep copy on the same device as a leaf (not differentiable).
  Tensor clone() const { return to(device()); }

  /// Host copy of the elements, widened to double (exactly, but int64 values above 2^53 round).
  std::vector<double> to_vector() const;
  /// The single element of a one-element tensor; throws std::logic_error otherwise.
  double item() const;

  /// Internal: the shared state (used by the backward engine and Function).
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// Shared state behind a Tensor handle.
struct TensorImpl {
  std::shared_ptr<kernels::Buffer> storage;
  Shape shape;
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Function> grad_fn;
  std::function<void()> post_accumulate_hook;  ///< see Tensor::set_post_accumulate_hook
};

/// Whether `t` is the only handle to its state and the only tensor on its storage, which is its
/// own (no other handle, `detach` copy, `reshape` or `flat_view` shares it, and it is not a view
/// of a flat buffer): a backward that reads a saved tensor for the last time may then write a
/// gradient of the same shape and dtype over it (the cross-entropy's logits). False for an
/// undefined tensor.
bool storage_is_exclusive(const Tensor& t);

/// Throws std::invalid_argument "<op>: <what> shape [..] does not match [..]" unless a == b.
void check_same_shape(const char* op, const Tensor& a, const Tensor& b);

}  // namespace mpitron::autograd
