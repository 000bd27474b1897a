// Buffer and the copies between devices.
#include "kernels/device.h"

#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/bf16.h"
#include "kernels/cuda_module.h"

namespace mpitron::kernels {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      break;
  }
  return 4;
}

bool is_floating(DType dtype) {
  return dtype == DType::f32 || dtype == DType::f64;
}

std::string to_string(Device device) {
  return device == Device::cuda ? "cuda" : "cpu";
}

std::string to_string(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return "float64";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::bf16:
      return "bfloat16";
    case DType::f32:
      break;
  }
  return "float32";
}

void reject_bf16(const std::string& what) {
  throw std::logic_error("kernels: a bfloat16 buffer reached " + what +
                         " (bfloat16 buffers are only copied, converted with kernels::convert and "
                         "multiplied with kernels::gemm_bf16)");
}

Buffer::Buffer(std::size_t numel, DType dtype, Device device)
    : numel_(numel), dtype_(dtype), device_(device) {
  if (device == Device::cuda) backend(device);  // throws when CUDA is missing, also for numel 0
  if (numel > 0) data_ = cached_allocate(device, false, bytes());
}

Buffer Buffer::pinned_host(std::size_t numel, DType dtype) {
  Buffer buffer;
  buffer.numel_ = numel;
  buffer.dtype_ = dtype;
  buffer.pinned_ = cuda_module_loaded();
  if (numel > 0) {
    buffer.data_ = cached_allocate(buffer.pinned_ ? Device::cuda : Device::cpu, buffer.pinned_,
                                   buffer.bytes());
  }
  return buffer;
}

Buffer Buffer::view(Buffer& base, std::size_t offset, std::size_t numel) {
  if (offset > base.numel_ || numel > base.numel_ - offset) {
    throw std::out_of_range("kernels::Buffer::view: elements [" + std::to_string(offset) + ", " +
                            std::to_string(offset) + " + " + std::to_string(numel) +
                            ") exceed a buffer of " + std::to_string(base.numel_));
  }
  Buffer view;
  view.data_ =
      numel == 0 ? nullptr : static_cast<std::byte*>(base.data_) + offset * dtype_size(base.dtype_);
  view.numel_ = numel;
  view.dtype_ = base.dtype_;
  view.device_ = base.device_;
  view.pinned_ = base.pinned_;
  view.owner_ = false;
  return view;
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      numel_(std::exchange(other.numel_, 0)),
      dtype_(other.dtype_),
      device_(other.device_),
      pinned_(std::exchange(other.pinned_, false)),
      owner_(std::exchange(other.owner_, true)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    numel_ = std::exchange(other.numel_, 0);
    dtype_ = other.dtype_;
    device_ = other.device_;
    pinned_ = std::exchange(other.pinned_, false);
    owner_ = std::exchange(other.owner_, true);
  }
  return *this;
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() noexcept {
  if (data_ != nullptr && owner_) {
    cached_deallocate(pinned_ ? Device::cuda : device_, pinned_, data_, bytes());
  }
  data_ = nullptr;
  numel_ = 0;
  pinned_ = false;
  owner_ = true;
}

namespace {

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, double>) return DType::f64;
  if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  if constexpr (std::is_same_v<T, bf16>) return DType::bf16;
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
                std::is_same_v<T, bf16>);
  return DType::f32;
}

}  // namespace

template <class T>
T* Buffer::data_as() {
  constexpr DType wanted = dtype_of<T>();
  if (dtype_ != wanted) {
    throw std::logic_error("kernels::Buffer::data_as: buffer holds " + to_string(dtype_) +
                           ", not " + to_string(wanted));
  }
  return static_cast<T*>(data_);
}

template <class T>
const T* Buffer::data_as() const {
  return const_cast<Buffer*>(this)->data_as<T>();
}

template float* Buffer::data_as<float>();
template double* Buffer::data_as<double>();
template std::int32_t* Buffer::data_as<std::int32_t>();
template std::int64_t* Buffer::data_as<std::int64_t>();
template bf16* Buffer::data_as<bf16>();
template const float* Buffer::data_as<float>() const;
template const double* Buffer::data_as<double>() const;
template const std::int32_t* Buffer::data_as<std::int32_t>() const;
template const std::int64_t* Buffer::data_as<std::int64_t>() const;
template const bf16* Buffer::data_as<bf16>() const;

Buffer Buffer::to(Device device) const {
  Buffer out(numel_, dtype_, device);
  copy(*this, out);
  return out;
}

void copy(const Buffer& src, Buffer& dst) {
  if (src.numel() != dst.numel() || src.dtype() != dst.dtype()) {
    throw std::invalid_argument("kernels::copy: src has " + std::to_string(src.numel()) + " " +
                                to_string(src.dtype()) + " elements but dst has " +
                                std::to_string(dst.numel()) + " " + to_string(dst.dtype()));
  }
  copy_bytes(src, 0, dst, 0, src.bytes());
}

void copy_bytes(const Buffer& src, std::size_t src_offset, Buffer& dst, std::size_t dst_offset,
                std::size_t bytes) {
  auto check = [bytes](const char* name, const Buffer& buffer, std::size_t offset) {
    if (offset > buffer.bytes() || bytes > buffer.bytes() - offset) {
      throw std::out_of_range("kernels::copy_bytes: " + std::to_string(bytes) +
                              " bytes at offset " + std::to_string(offset) + " run past the " +
                              std::to_string(buffer.bytes()) + "-byte " + name + " buffer");
    }
  };
  check("src", src, src_offset);
  check("dst", dst, dst_offset);
  if (bytes == 0) return;
  const bool on_cuda = src.device() == Device::cuda || dst.device() == Device::cuda;
  backend(on_cuda ? Device::cuda : Device::cpu)
      .copy_bytes(static_cast<char*>(dst.data()) + dst_offset,
                  static_cast<const char*>(src.data()) + src_offset, bytes);
}

void synchronize(Device device) {
  if (device == Device::cuda && cuda_module_loaded()) backend(device).synchronize();
}

}  // namespace mpitron::kernels
