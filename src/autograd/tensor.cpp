#include "autograd/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/op_util.h"
#include "kernels/ops.h"

namespace mpitron::autograd {

std::int64_t numel_of(const Shape& shape) {
  std::int64_t n = 1;
  for (auto extent : shape) {
    if (extent < 0) throw std::invalid_argument("negative extent in shape " + to_string(shape));
    n *= extent;
  }
  return n;
}

std::string to_string(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Tensor Tensor::from_buffer(kernels::Buffer buffer, const Shape& shape) {
  if (static_cast<std::int64_t>(buffer.numel()) != numel_of(shape)) {
    throw std::invalid_argument(
        fmt::format("from_buffer: buffer of {} elements cannot hold shape {}", buffer.numel(),
                    to_string(shape)));
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<kernels::Buffer>(std::move(buffer));
  impl->shape = shape;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return from_buffer(kernels::Buffer(static_cast<std::size_t>(numel_of(shape)), dtype, device),
                     shape);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  kernels::fill(t.buffer(), value);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype,
                           Device device) {
  if (static_cast<std::int64_t>(values.size()) != numel_of(shape)) {
    throw std::invalid_argument(fmt::format("from_vector: {} values do not fill shape {}",
                                            values.size(), to_string(shape)));
  }
  kernels::Buffer host(values.size(), dtype, Device::cpu);
  kernels::dispatch_any(dtype, [&]<class T>(T) {
    if constexpr (std::is_integral_v<T>) {
      for (std::size_t i = 0; i < values.size(); ++i) {
        // Both bounds are exact powers of two in double; the upper one is excluded.
        const double lo = static_cast<double>(std::numeric_limits<T>::min());
        const double hi = -lo;
        if (!(values[i] >= lo && values[i] < hi && std::trunc(values[i]) == values[i])) {
          throw std::invalid_argument(
              fmt::format("from_vector: value {} at position {} is not an {}", values[i], i,
                          kernels::to_string(dtype)));
        }
      }
    }
    std::transform(values.begin(), values.end(), host.data_as<T>(),
                   [](double v) { return static_cast<T>(v); });
  });
  return from_buffer(device == Device::cpu ? std::move(host) : host.to(device), shape);
}

Tensor Tensor::from_indices(const std::vector<std::int64_t>& values, const Shape& shape,
                            Device device) {
  if (static_cast<std::int64_t>(values.size()) != numel_of(shape)) {
    throw std::invalid_argument(fmt::format("from_indices: {} values do not fill shape {}",
                                            values.size(), to_string(shape)));
  }
  kernels::Buffer host(values.size(), DType::i64, Device::cpu);
  std::copy(values.begin(), values.end(), host.data_as<std::int64_t>());
  return from_buffer(device == Device::cpu ? std::move(host) : host.to(device), shape);
}

namespace {
const TensorImpl& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) throw std::logic_error("use of an undefined tensor");
  return *impl;
}
}  // namespace

const Shape& Tensor::shape() const {
  return checked(impl_).shape;
}

std::int64_t Tensor::size(int d) const {
  const int n = ndim();
  const int index = d < 0 ? d + n : d;
  if (index < 0 || index >= n) {
    throw std::out_of_range(fmt::format("dim {} out of range for shape {}", d, to_string(shape())));
  }
  return shape()[static_cast<std::size_t>(index)];
}

std::int64_t Tensor::numel() const {
  return numel_of(shape());
}
Device Tensor::device() const {
  return checked(impl_).storage->device();
}
DType Tensor::dtype() const {
  return checked(impl_).storage->dtype();
}
kernels::Buffer& Tensor::buffer() {
  return *checked(impl_).storage;
}
const kernels::Buffer& Tensor::buffer() const {
  return *checked(impl_).storage;
}
bool Tensor::requires_grad() const {
  return checked(impl_).requires_grad;
}
Tensor Tensor::grad() const {
  return checked(impl_).grad;
}
const std::shared_ptr<Function>& Tensor::grad_fn() const {
  return checked(impl_).grad_fn;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  if (!is_leaf()) throw std::logic_error("set_requires_grad: only leaf tensors can be marked");
  if (requires_grad && !kernels::is_floating(dtype())) {
    throw std::invalid_argument("set_requires_grad: a " + kernels::to_string(dtype()) + " tensor " +
                                to_string(shape()) + " cannot require grad");
  }
  impl_->requires_grad = requires_grad;
  return *this;
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) check_same_shape("set_grad", *this, grad);
  impl_->grad = grad;
}

void Tensor::backward() const {
  if (numel() != 1) {
    throw std::logic_error("backward() without a gradient needs a one-element tensor, not shape " +
                           to_string(shape()));
  }
  backward(Tensor::full(shape(), 1.0, dtype(), device()));
}

void Tensor::backward(const Tensor& grad_output) const {
  check_same_shape("backward", *this, grad_output);
  detail::check_compatible("backward", {*this, grad_output});
  if (!requires_grad()) throw std::logic_error("backward: the tensor does not require grad");
  run_backward(*this, grad_output);
}

bool storage_is_exclusive(const Tensor& t) {
  return t.defined() && t.impl().use_count() == 1 && t.impl()->storage.use_count() == 1 &&
         t.buffer().owns_storage();
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = checked(impl_).storage;
  impl->shape = impl_->shape;
  return Tensor(std::move(impl));
}

Tensor Tensor::flat_view(std::int64_t offset, const Shape& shape) const {
  // The view Buffer lives beside a reference to the base storage; the Tensor's storage pointer
  // aliases it, so the base is freed only after the last view is gone.
  struct View {
    std::shared_ptr<kernels::Buffer> base;
    kernels::Buffer view;
  };
  const std::shared_ptr<kernels::Buffer>& base = checked(impl_).storage;
  if (offset < 0) {
    throw std::out_of_range(fmt::format("flat_view: negative offset {}", offset));
  }
  auto holder = std::make_shared<View>(
      View{base, kernels::Buffer::view(*base, static_cast<std::size_t>(offset),
                                       static_cast<std::size_t>(numel_of(shape)))});
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::shared_ptr<kernels::Buffer>(holder, &holder->view);
  impl->shape = shape;
  return Tensor(std::move(impl));
}

void Tensor::move_storage_to(const Tensor& destination) {
  check_same_shape("move_storage_to", *this, destination);
  detail::check_compatible("move_storage_to", {*this, destination});
  kernels::copy(buffer(), *destination.impl_->storage);
  impl_->storage = destination.impl_->storage;
}

void Tensor::set_post_accumulate_hook(std::function<void()> hook) {
  if (!is_leaf() || !requires_grad()) {
    throw std::logic_error("set_post_accumulate_hook: needs a leaf that requires grad, not shape " +
                           to_string(shape()));
  }
  impl_->post_accumulate_hook = std::move(hook);
}

Tensor Tensor::to(Device device) const {
  return from_buffer(buffer().to(device), shape());
}

std::vector<double> Tensor::to_vector() const {
  kernels::Buffer host = buffer().to(Device::cpu);
  if (host.dtype() == DType::bf16) {
    kernels::Buffer widened(host.numel(), DType::f32, Device::cpu);
    kernels::convert(host, widened);
    host = std::move(widened);
  }
  return kernels::dispatch_any(host.dtype(), [&]<class T>(T) {
    const T* p = host.data_as<T>();
    std::vector<double> values(host.numel());
    std::transform(p, p + host.numel(), values.begin(), [](T v) { return static_cast<double>(v); });
    return values;
  });
}

double Tensor::item() const {
  if (numel() != 1) {
    throw std::logic_error("item() needs a one-element tensor, not shape " + to_string(shape()));
  }
  return to_vector()[0];
}

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    throw std::invalid_argument(fmt::format("{}: shape {} does not match {}", op,
                                            to_string(a.shape()), to_string(b.shape())));
  }
}

}  // namespace mpitron::autograd
