#include "nn/checkpoint/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "nn/checkpoint/atomic_file.h"

namespace mpitron::nn {

// The data section is copied to and from memory as is: that is the file's byte order only on a
// little-endian host (x86-64, AArch64).
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

using Json = nlohmann::ordered_json;
constexpr const char* kMetadataKey = "__metadata__";

// The dtypes written, beside the tensor dtypes they store; F16 is only read.
constexpr StoredDType kStoredDTypes[] = {StoredDType::f32, StoredDType::f64, StoredDType::i32,
                                         StoredDType::i64, StoredDType::bf16};
constexpr autograd::DType kTensorDTypes[] = {autograd::DType::f32, autograd::DType::f64,
                                             autograd::DType::i32, autograd::DType::i64,
                                             autograd::DType::bf16};

std::size_t element_size(StoredDType dtype) {
  if (dtype == StoredDType::f16) return sizeof(std::uint16_t);
  return kernels::dtype_size(kTensorDTypes[static_cast<int>(dtype)]);
}

/// A host tensor's or int64 vector's bytes, with the header fields that describe them.
struct Payload {
  StoredDType dtype;
  autograd::Shape shape;
  autograd::Tensor host;  // keeps a host copy of a CUDA tensor alive while it is written
  const void* data;
  std::size_t bytes;
};

Payload payload_of(const NamedTensor& named) {
  if (const auto* tensor = std::get_if<autograd::Tensor>(&named.value)) {
    if (!tensor->defined()) {
      throw std::invalid_argument(fmt::format("safetensors: tensor '{}' is undefined", named.name));
    }
    autograd::Tensor host =
        tensor->device() == autograd::Device::cpu ? *tensor : tensor->to(autograd::Device::cpu);
    const void* data = host.buffer().data();
    const std::size_t bytes = host.buffer().bytes();
    return {stored_dtype(host.dtype()), host.shape(), host, data, bytes};
  }
  const auto& ints = std::get<Int64Tensor>(named.value);
  if (static_cast<std::int64_t>(ints.values.size()) != autograd::numel_of(ints.shape)) {
    throw std::invalid_argument(fmt::format("safetensors: '{}' has {} values for shape {}",
                                            named.name, ints.values.size(),
                                            autograd::to_string(ints.shape)));
  }
  return {StoredDType::i64,
          ints.shape,
          {},
          ints.values.data(),
          ints.values.size() * sizeof(std::int64_t)};
}

[[noreturn]] void damaged(const std::filesystem::path& path, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", path.string(), what));
}

StoredDType parse_dtype(const std::filesystem::path& path, const std::string& name,
                        const Json& value) {
  const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  for (StoredDType dtype : kStoredDTypes) {
    if (text == to_string(dtype)) return dtype;
  }
  if (text == to_string(StoredDType::f16)) return StoredDType::f16;
  damaged(
      path,
      fmt::format("tensor '{}' has unknown dtype {} (mpitron reads F32, F64, I32, I64, BF16, F16)",
                  name, value.dump()));
}

/// Non-negative integers of a JSON array of `count` entries (any count when count < 0).
std::vector<std::uint64_t> parse_naturals(const std::filesystem::path& path,
                                          const std::string& name, const char* field,
                                          const Json& value, int count) {
  const bool shape_ok = value.is_array() && (count < 0 || static_cast<int>(value.size()) == count);
  if (!shape_ok || !std::all_of(value.begin(), value.end(),
                                [](const Json& v) { return v.is_number_unsigned(); })) {
    damaged(path, fmt::format("tensor '{}' has {} {}, not a list of {}non-negative integers", name,
                              field, value.dump(), count < 0 ? "" : fmt::format("{} ", count)));
  }
  return value.get<std::vector<std::uint64_t>>();
}

SafetensorsEntry parse_entry(const std::filesystem::path& path, const std::string& name,
                             const Json& value) {
  if (!value.is_object() || value.size() != 3 || !value.contains("dtype") ||
      !value.contains("shape") || !value.contains("data_offsets")) {
    damaged(path, fmt::format("tensor '{}' is {}, not {{\"dtype\", \"shape\", \"data_offsets\"}}",
                              name, value.dump()));
  }
  SafetensorsEntry entry{name, parse_dtype(path, name, value["dtype"]), {}, 0, 0};
  std::uint64_t bytes = element_size(entry.dtype);
  for (std::uint64_t extent : parse_naturals(path, name, "shape", value["shape"], -1)) {
    if (extent != 0 && bytes > (std::uint64_t{1} << 62) / extent) {
      damaged(path, fmt::format("tensor '{}' has an impossibly large shape {}", name,
                                value["shape"].dump()));
    }
    bytes *= extent;
    entry.shape.push_back(static_cast<std::int64_t>(extent));
  }
  const auto offsets = parse_naturals(path, name, "data_offsets", value["data_offsets"], 2);
  entry.begin = offsets[0];
  entry.end = offsets[1];
  if (entry.begin > entry.end) {
    damaged(path, fmt::format("tensor '{}' has data_offsets [{}, {}] out of order", name,
                              entry.begin, entry.end));
  }
  if (entry.end - entry.begin != bytes) {
    damaged(path, fmt::format("tensor '{}' of shape {} and dtype {} needs {} bytes but its "
                              "data_offsets [{}, {}] hold {}",
                              name, autograd::to_string(entry.shape), to_string(entry.dtype), bytes,
                              entry.begin, entry.end, entry.end - entry.begin));
  }
  return entry;
}

/// Checks that the entries tile [0, data_bytes) exactly.
void check_tiling(const std::filesystem::path& path, std::vector<SafetensorsEntry> entries,
                  std::uint64_t data_bytes) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.begin < b.begin; });
  std::uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin > data_bytes) {
      damaged(path, fmt::format("tensor '{}' data_offsets [{}, {}] lie beyond the {} bytes of data",
                                e.name, e.begin, e.end, data_bytes));
    }
    if (e.begin < covered) {
      damaged(path, fmt::format("tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", previous->name,
                                previous->begin, previous->end, e.name, e.begin, e.end));
    }
    if (e.begin > covered) {
      damaged(path, fmt::format("data bytes [{}, {}) before tensor '{}' belong to no tensor",
                                covered, e.begin, e.name));
    }
    if (e.end > data_bytes) {
      damaged(path, fmt::format("short data: tensor '{}' needs data bytes [{}, {}) but the file "
                                "holds {}",
                                e.name, e.begin, e.end, data_bytes));
    }
    covered = e.end;
    previous = &e;
  }
  if (covered < data_bytes) {
    damaged(path, fmt::format("{} bytes after the last tensor's data", data_bytes - covered));
  }
}

}  // namespace

std::string to_string(StoredDType dtype) {
  switch (dtype) {
    case StoredDType::f32:
      return "F32";
    case StoredDType::f64:
      return "F64";
    case StoredDType::i32:
      return "I32";
    case StoredDType::i64:
      return "I64";
    case StoredDType::bf16:
      return "BF16";
    case StoredDType::f16:
      return "F16";
  }
  return "?";
}

StoredDType stored_dtype(autograd::DType dtype) {
  for (std::size_t i = 0; i < std::size(kTensorDTypes); ++i) {
    if (kTensorDTypes[i] == dtype) return kStoredDTypes[i];
  }
  throw std::invalid_argument("safetensors: unknown tensor dtype");
}

float half_to_float(std::uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const int exponent = (bits >> 10) & 0x1f;
  const std::uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal: mantissa 2^-24
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

autograd::Tensor rounded_to_bf16(const autograd::Tensor& tensor) {
  if (tensor.dtype() != autograd::DType::f32) {
    throw std::invalid_argument("rounded_to_bf16: the tensor is not float32");
  }
  const autograd::Tensor host =
      tensor.device() == autograd::Device::cpu ? tensor : tensor.to(autograd::Device::cpu);
  autograd::Tensor rounded =
      autograd::Tensor::empty(host.shape(), autograd::DType::bf16, autograd::Device::cpu);
  kernels::convert(host.buffer(), rounded.buffer());
  return rounded;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<NamedTensor>& tensors,
                       const SafetensorsMetadata& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::vector<Payload> payloads;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const NamedTensor& named : tensors) {
    if (named.name.empty() || named.name == kMetadataKey || !names.insert(named.name).second) {
      throw std::invalid_argument(
          fmt::format("safetensors: tensor name '{}' is empty, reserved or repeated", named.name));
    }
    payloads.push_back(payload_of(named));
    const Payload& p = payloads.back();
    header[named.name] = {{"dtype", to_string(p.dtype)},
                          {"shape", p.shape},
                          {"data_offsets", {offset, offset + p.bytes}}};
    offset += p.bytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  const std::uint64_t length = text.size();

  AtomicFile file(path);
  file.write(&length, sizeof(length));
  file.write(text.data(), text.size());
  for (const Payload& p : payloads)
    file.write(p.data, p.bytes);
  file.commit();
}

SafetensorsReader::SafetensorsReader(std::filesystem::path path)
    : path_(std::move(path)), file_(path_, std::ios::binary) {
  if (!file_) damaged(path_, "cannot open the file");
  std::error_code error;
  const std::uint64_t size = std::filesystem::file_size(path_, error);
  if (error) damaged(path_, "cannot read the file size: " + error.message());
  std::uint64_t length = 0;
  if (size < sizeof(length)) {
    damaged(path_, fmt::format("the file has {} bytes, fewer than the 8-byte header length", size));
  }
  file_.read(reinterpret_cast<char*>(&length), sizeof(length));
  if (length > size - sizeof(length)) {
    damaged(path_, fmt::format("header length {} is beyond the file ({} bytes)", length, size));
  }
  std::string text(length, '\0');
  file_.read(text.data(), static_cast<std::streamsize>(length));
  if (!file_) damaged(path_, "cannot read the header");
  data_start_ = sizeof(length) + length;

  Json header;
  try {
    header = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    damaged(path_, fmt::format("bad JSON header: {}", e.what()));
  }
  if (!header.is_object()) damaged(path_, "the JSON header is not an object");
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      const bool strings =
          value.is_object() &&
          std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_string(); });
      if (!strings) damaged(path_, "__metadata__ is not an object of strings");
      metadata_ = value.get<SafetensorsMetadata>();
      continue;
    }
    index_[name] = entries_.size();
    entries_.push_back(parse_entry(path_, name, value));
  }
  check_tiling(path_, entries_, size - data_start_);
}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const SafetensorsEntry* found = find(name);
  if (found == nullptr) damaged(path_, fmt::format("no tensor '{}'", name));
  return *found;
}

void SafetensorsReader::read_bytes(const SafetensorsEntry& e, void* destination) {
  file_.clear();
  file_.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  file_.read(static_cast<char*>(destination), static_cast<std::streamsize>(e.end - e.begin));
  if (!file_) {
    damaged(path_, fmt::format("short data: cannot read tensor '{}' (data bytes [{}, {}))", e.name,
                               e.begin, e.end));
  }
}

autograd::Tensor SafetensorsReader::read_tensor(const std::string& name) {
  const SafetensorsEntry& e = entry(name);
  if (e.dtype == StoredDType::bf16 || e.dtype == StoredDType::f16) {
    std::vector<std::uint16_t> stored(static_cast<std::size_t>(autograd::numel_of(e.shape)));
    read_bytes(e, stored.data());
    autograd::Tensor wide = autograd::Tensor::empty(e.shape);
    auto* out = static_cast<float*>(wide.buffer().data());
    if (e.dtype == StoredDType::f16) {
      std::transform(stored.begin(), stored.end(), out, half_to_float);
    } else {
      std::transform(stored.begin(), stored.end(), out,
                     [](std::uint16_t bits) { return kernels::bf16_to_float({bits}); });
    }
    return wide;
  }
  autograd::Tensor tensor = autograd::Tensor::empty(
      e.shape, kTensorDTypes[static_cast<int>(e.dtype)], autograd::Device::cpu);
  read_bytes(e, tensor.buffer().data());
  return tensor;
}

autograd::Tensor SafetensorsReader::read_float32(const std::string& name) {
  const SafetensorsEntry& e = entry(name);
  if (e.dtype == StoredDType::i32 || e.dtype == StoredDType::i64) {
    damaged(path_, fmt::format("tensor '{}' is {}, not a floating dtype (F32, F64, BF16 or F16)",
                               name, to_string(e.dtype)));
  }
  const autograd::Tensor tensor = read_tensor(name);
  if (e.dtype != StoredDType::f64) return tensor;
  return autograd::Tensor::from_vector(tensor.to_vector(), tensor.shape());
}

Int64Tensor SafetensorsReader::read_int64(const std::string& name) {
  const SafetensorsEntry& e = entry(name);
  if (e.dtype != StoredDType::i64) {
    damaged(path_, fmt::format("tensor '{}' is {}, not I64", name, to_string(e.dtype)));
  }
  Int64Tensor ints{e.shape, std::vector<std::int64_t>(autograd::numel_of(e.shape))};
  read_bytes(e, ints.values.data());
  return ints;
}

std::vector<NamedTensor> SafetensorsReader::read_all() {
  std::vector<NamedTensor> tensors;
  for (const SafetensorsEntry& e : entries_) {
    if (e.dtype == StoredDType::i64) {
      tensors.push_back({e.name, read_int64(e.name)});
    } else {
      tensors.push_back({e.name, read_tensor(e.name)});
    }
  }
  return tensors;
}

}  // namespace mpitron::nn
