// Reading and writing the safetensors file format (our own implementation, no library).
//
// Format (all integers little-endian):
//   bytes [0, 8)        N, an unsigned 64-bit header length;
//   bytes [8, 8 + N)    a UTF-8 JSON object, padded at the end with spaces (0x20) so that N is a
//                       multiple of 8:
//                         {"__metadata__": {"<key>": "<value>", ...},          (optional)
//                          "<tensor name>": {"dtype": "F32" | "F64" | "I32" | "I64" | "BF16" |
//                          "F16",
//                                            "shape": [d0, d1, ...],           ([] = a scalar)
//                                            "data_offsets": [begin, end]}, ...}
//   bytes [8 + N, EOF)  the data section: each tensor's elements, row-major, little-endian, at
//                       byte offsets [begin, end) relative to the start of the data section.
// The tensors tile the data section exactly: sorted by begin, the first begins at 0, each begins
// where the previous ends, the last ends at the end of the file, and end - begin equals
// numel(shape) * element size. Writing puts "__metadata__" first (when there is any) and the
// tensors in the order given, data in that same order, and writes the header without spaces
// inside the JSON. Readers accept any key order and JSON spacing (e.g. Python's json.dumps).
// This is the format of https://github.com/huggingface/safetensors restricted to the five
// dtypes mpitron uses; PyTorch users open our files with `safetensors.torch.load_file`. BF16
// (bfloat16, the upper half of a float32: kernels/bf16.h) is how Hugging Face publishes most
// Llama weights; it is read as float32 (exactly) and written from DType::bf16 tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "autograd/tensor.h"

namespace mpitron::nn {

/// A damaged or mismatched checkpoint file: the message is one line that starts with the file's
/// path and says what is wrong. Derives from std::runtime_error.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Row-major int64 values (safetensors dtype I64), e.g. token ids or counters.
struct Int64Tensor {
  autograd::Shape shape;
  std::vector<std::int64_t> values;
};

/// One named tensor of a file: an autograd Tensor of any dtype (any device when written, a CPU
/// leaf when read) or Int64Tensor values.
struct NamedTensor {
  std::string name;
  std::variant<autograd::Tensor, Int64Tensor> value;
};

/// The "__metadata__" object: string keys to string values.
using SafetensorsMetadata = std::map<std::string, std::string>;

/// Writes `tensors` (in this order) and `metadata` to `path` atomically (AtomicFile: temporary
/// name in the same directory, fsync, rename, fsync of the directory). CUDA tensors are copied
/// to the host first. Throws std::invalid_argument "safetensors: ..." for an empty, repeated or
/// "__metadata__" name, an undefined tensor, or an Int64Tensor whose value count differs from
/// its shape's; std::runtime_error naming the path when the file cannot be written.
void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const SafetensorsMetadata& metadata = {});

/// Element type of a stored tensor. F16 (IEEE half precision, in which many Hugging Face Llama
/// files are published) is read only, widened exactly to float32.
enum class StoredDType { f32, f64, i32, i64, bf16, f16 };

/// "F32" / "F64" / "I32" / "I64" / "BF16" / "F16".
std::string to_string(StoredDType dtype);

/// The stored dtype of a tensor dtype (f32 -> F32, f64 -> F64, i32 -> I32, i64 -> I64, bf16 ->
/// BF16).
StoredDType stored_dtype(autograd::DType dtype);

/// The float32 value of the IEEE 754 half-precision bits `bits` (exact: every half, subnormals,
/// infinities and NaN included, is a float32).
float half_to_float(std::uint16_t bits);

/// A float32 tensor (any device) rounded to a DType::bf16 CPU tensor of its shape, each value to
/// nearest, ties to even (kernels::convert; NaN, infinities and overflow as kernels/bf16.h
/// states): what write_safetensors stores as BF16. Throws std::invalid_argument for another
/// dtype.
autograd::Tensor rounded_to_bf16(const autograd::Tensor& tensor);

/// One header entry: where a tensor's bytes lie in the data section.
struct SafetensorsEntry {
  std::string name;
  StoredDType dtype = StoredDType::f32;
  autograd::Shape shape;
  std::uint64_t begin = 0;  ///< byte offset in the data section
  std::uint64_t end = 0;    ///< one past the last byte
};

/// An open safetensors file whose header has been read and validated against the file size;
/// tensors are read on demand, each with one seek and one read, so a caller that wants a few
/// tensors of a large file reads only their bytes.
class SafetensorsReader {
 public:
  /// Opens `path` and validates it. Throws CheckpointError "<path>: <what>" when the file cannot
  /// be opened, is shorter than 8 bytes, its header length reaches beyond the file, the header is
  /// not JSON or not an object of the form above, a dtype is not F32/F64/I32/I64/BF16/F16, a shape
  /// is not a list of non-negative integers, data_offsets are out of order (begin > end), overlap,
  /// leave a gap or lie beyond the data section, a shape does not match its byte size, the data
  /// section is shorter than the tensors need ("short data") or has bytes after the last tensor.
  explicit SafetensorsReader(std::filesystem::path path);

  const std::filesystem::path& path() const { return path_; }
  /// The tensors in header order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsMetadata& metadata() const { return metadata_; }
  /// The entry called `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const;

  /// Tensor `name` as a new CPU leaf of its stored shape and dtype, except that BF16 and F16 are
  /// widened exactly to float32 (kernels::bf16_to_float, half_to_float). Throws CheckpointError
  /// "<path>: ..." when there is no such tensor or the file has become shorter since it was
  /// opened.
  autograd::Tensor read_tensor(const std::string& name);
  /// Tensor `name` of a floating dtype as a float32 CPU leaf: F32 as stored, BF16 and F16 widened
  /// exactly, F64 rounded to nearest (a weight file read into a float32 model). Throws
  /// CheckpointError like read_tensor, and "<path>: tensor 'x' is I32, not a floating dtype (F32,
  /// F64, BF16 or F16)" for an integer one.
  autograd::Tensor read_float32(const std::string& name);
  /// Tensor `name` (I64). Throws CheckpointError like read_tensor (for a non-I64 entry).
  Int64Tensor read_int64(const std::string& name);
  /// Every tensor in header order (I64 ones as Int64Tensor).
  std::vector<NamedTensor> read_all();

 private:
  const SafetensorsEntry& entry(const std::string& name) const;
  void read_bytes(const SafetensorsEntry& entry, void* destination);

  std::filesystem::path path_;
  std::ifstream file_;
  std::uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::size_t> index_;
  SafetensorsMetadata metadata_;
};

}  // namespace mpitron::nn
