// Device-tagged owning memory: the only place mpitron allocates tensor storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace mpitron::kernels {

/// Where a buffer's memory lives. `cuda` always means the current CUDA device (mpitron runs every
/// rank of a workstation on device 0).
enum class Device { cpu, cuda };

/// Element type of a buffer: float32 for everything, float64 for gradient checks (CPU and CUDA),
/// int32 / int64 for token ids and targets, bf16 (bfloat16, kernels/bf16.h) for mixed precision.
/// Integer buffers can be allocated, copied, filled and moved by the layout ops (fill, transpose,
/// copy_rows) and read as indices (embedding, cross-entropy); every arithmetic op rejects them.
/// bfloat16 buffers are storage: they can be allocated, copied (copy, copy_bytes, Buffer::to),
/// converted to and from float32 (kernels::convert) and multiplied (kernels::gemm_bf16); every
/// other op rejects them with an error naming bfloat16. The enumerators' order is their number
/// in point-to-point shape headers, so new ones go last.
enum class DType { f32, f64, i32, i64, bf16 };

/// Bytes per element of `dtype` (2 for bf16, 4 for f32/i32, 8 for f64/i64).
std::size_t dtype_size(DType dtype);

/// True for f32 and f64, the dtypes the float kernels compute in (not bf16, which only stores).
bool is_floating(DType dtype);

/// "cpu" / "cuda".
std::string to_string(Device device);

/// "float32" / "float64" / "int32" / "int64" / "bfloat16".
std::string to_string(DType dtype);

/// True when the CUDA backend module (libmpitron_cuda.so, built with MPITRON_WITH_CUDA) is
/// installed beside the kernels library. Loads nothing.
bool cuda_built();

/// Number of CUDA devices the driver reports to this process (honouring CUDA_VISIBLE_DEVICES);
/// 0 when the module is not installed or there is no driver. Probes the driver library
/// (libcuda.so.1) once, without the CUDA runtime; the module itself is loaded only by the first
/// cuda buffer. Never throws.
int cuda_device_count();

/// True when `cuda_device_count() > 0`.
bool cuda_available();

/// Throws std::logic_error "kernels: a bfloat16 buffer reached <what>", naming the ops that take
/// bfloat16 buffers.
[[noreturn]] void reject_bf16(const std::string& what);

/// Calls `f(T{})` with T = float for f32 and double for f64. Throws std::logic_error for an integer
/// or bfloat16 dtype (kernels/ops.cpp rejects them before any arithmetic op reaches a backend).
template <class F>
decltype(auto) dispatch(DType dtype, F&& f) {
  if (dtype == DType::bf16) reject_bf16("a float32/float64 kernel");
  if (!is_floating(dtype)) {
    throw std::logic_error("kernels: an " + to_string(dtype) + " buffer reached a float kernel");
  }
  if (dtype == DType::f64) return f(double{});
  return f(float{});
}

/// Calls `f(I{})` with I = std::int32_t for i32 and std::int64_t for i64 (index buffers); throws
/// std::logic_error for a float or bfloat16 dtype.
template <class F>
decltype(auto) dispatch_index(DType dtype, F&& f) {
  if (dtype == DType::bf16) reject_bf16("an index kernel");
  if (dtype == DType::i64) return f(std::int64_t{});
  if (dtype != DType::i32) {
    throw std::logic_error("kernels: a " + to_string(dtype) + " buffer reached an index kernel");
  }
  return f(std::int32_t{});
}

/// Calls `f(T{})` with the element type of any dtype but bf16: e.g. for code that only moves
/// elements. Throws std::logic_error for bf16.
template <class F>
decltype(auto) dispatch_any(DType dtype, F&& f) {
  if (dtype == DType::bf16) reject_bf16("a kernel of float32, float64, int32 or int64");
  if (is_floating(dtype)) return dispatch(dtype, std::forward<F>(f));
  return dispatch_index(dtype, std::forward<F>(f));
}

/// An owning, device-tagged, contiguous array of `numel` elements of one dtype.
///
/// Move-only: copies are always explicit (`clone`, `to`, `copy`), so no host<->device transfer
/// ever happens implicitly. Storage comes from a per-device caching allocator, so a steady-state
/// training step that frees and re-allocates the same sizes does not call malloc/cudaMalloc.
/// Contents of a new buffer are uninitialized.
class Buffer {
 public:
  /// An empty buffer (numel 0, cpu, float32) that owns nothing.
  Buffer() = default;

  /// Allocates `numel` elements of `dtype` on `device`.
  /// Throws std::runtime_error when `device` is cuda and CUDA is not built or not available, or
  /// when the allocation fails (the message gives the byte count).
  Buffer(std::size_t numel, DType dtype, Device device);

  /// Allocates page-locked (pinned) host memory, used to stage CUDA buffers for MPI. Ordinary
  /// host memory while no cuda buffer has been made in this process (the CUDA module is not
  /// loaded), so CPU runs never load CUDA for it. `device()` is cpu.
  static Buffer pinned_host(std::size_t numel, DType dtype);

  /// A non-owning view of elements [offset, offset + numel) of `base` (same dtype and device):
  /// writes through it land in `base`, and destroying it frees nothing. `base` must outlive the
  /// view. Used for gradients that live in one flat buffer. Throws std::out_of_range when the
  /// range exceeds base.numel().
  static Buffer view(Buffer& base, std::size_t offset, std::size_t numel);

  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() { return data_; }
  const void* data() const { return data_; }

  /// Typed pointer (T is float, double, std::int32_t, std::int64_t or kernels::bf16); throws
  /// std::logic_error when T does not match `dtype()`.
  template <class T>
  T* data_as();
  template <class T>
  const T* data_as() const;

  std::size_t numel() const { return numel_; }
  std::size_t bytes() const { return numel_ * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool pinned() const { return pinned_; }
  bool empty() const { return numel_ == 0; }
  /// False for a `view`, whose elements belong to another buffer.
  bool owns_storage() const { return owner_; }

  /// A deep copy on `device` (also when it is already there).
  Buffer to(Device device) const;

  /// A deep copy on the same device.
  Buffer clone() const { return to(device_); }

 private:
  void release() noexcept;

  void* data_ = nullptr;
  std::size_t numel_ = 0;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  bool pinned_ = false;
  bool owner_ = true;  // false for a view: release() frees nothing
};

/// Copies every element of `src` into `dst`; both must have the same numel and dtype, and may be
/// on different devices (host<->device copies are synchronous). Throws std::invalid_argument
/// naming both sizes/dtypes on mismatch.
void copy(const Buffer& src, Buffer& dst);

/// Copies `bytes` raw bytes between two buffers' storage at byte offsets, across devices.
/// Used by the communication layer to stage slices. Throws std::out_of_range past either end.
void copy_bytes(const Buffer& src, std::size_t src_offset, Buffer& dst, std::size_t dst_offset,
                std::size_t bytes);

/// Blocks until all queued work on the CUDA device is done (no-op on CPU, and while no cuda
/// buffer has been made).
void synchronize(Device device);

}  // namespace mpitron::kernels
