// Device-tagged owning memory: the only place mpitron allocates tensor storage.
#pragma once

#include <cstddef>
#include <string>

namespace mpitron::kernels {

/// Where a buffer's memory lives. `cuda` always means the current CUDA device (mpitron runs every
/// rank of a workstation on device 0).
enum class Device { cpu, cuda };

/// Element type of a buffer: float32 for everything, float64 for gradient checks (CPU and CUDA).
enum class DType { f32, f64 };

/// Bytes per element of `dtype` (4 or 8).
std::size_t dtype_size(DType dtype);

/// "cpu" / "cuda".
std::string to_string(Device device);

/// "float32" / "float64".
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

  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  void* data() { return data_; }
  const void* data() const { return data_; }

  /// Typed pointer; throws std::logic_error when T does not match `dtype()`.
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
