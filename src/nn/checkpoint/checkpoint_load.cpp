// load_full_tensors: rebuilding full tensors from the shards of any saving topology.
#include <fmt/format.h>

#include <cstring>

#include "nn/checkpoint/checkpoint.h"

namespace mpitron::nn {
namespace {

std::string layout_text(int split_dim) {
  return split_dim == kReplicated ? "replicated" : fmt::format("split along dim {}", split_dim);
}

[[noreturn]] void mismatch(const SafetensorsReader& shard, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", shard.path().string(), what));
}

/// The shape each of `tp` slices of `record` has in the saved files.
Shape saved_shape(const SafetensorsReader& shard, const TensorRecord& record, int tp) {
  Shape shape = record.full_shape;
  if (record.split_dim == kReplicated || tp == 1) return shape;
  if (shape[record.split_dim] % tp != 0) {
    mismatch(shard, fmt::format("tensor '{}': the wanted full shape {} cannot be cut into the "
                                "saved tp {} slices along dim {}",
                                record.name, autograd::to_string(shape), tp, record.split_dim));
  }
  shape[record.split_dim] /= tp;
  return shape;
}

/// Checks that tensor `record.name` of `shard` is one of `tp` saved slices of the wanted tensor.
void check_slice(const SafetensorsReader& shard, const TensorRecord& record, int tp) {
  const SafetensorsEntry* entry = shard.find(record.name);
  if (entry == nullptr) mismatch(shard, fmt::format("no tensor '{}'", record.name));
  if (entry->dtype != stored_dtype(record.dtype)) {
    mismatch(shard, fmt::format("tensor '{}' is {} but the model wants {}", record.name,
                                to_string(entry->dtype), to_string(stored_dtype(record.dtype))));
  }
  if (tp > 1 && saved_split_dim(shard, record.name) != record.split_dim) {
    mismatch(shard, fmt::format("tensor '{}' was saved {} but the model wants it {}", record.name,
                                layout_text(saved_split_dim(shard, record.name)),
                                layout_text(record.split_dim)));
  }
  const Shape expected = saved_shape(shard, record, tp);
  if (entry->shape != expected) {
    const std::string of_full = expected == record.full_shape
                                    ? ""
                                    : fmt::format(" (full shape {} over tp {})",
                                                  autograd::to_string(record.full_shape), tp);
    mismatch(shard, fmt::format("tensor '{}' has shape {} but the model wants {}{}", record.name,
                                autograd::to_string(entry->shape), autograd::to_string(expected),
                                of_full));
  }
}

/// The full tensor from one pp stage's files (`stage[t]` is tp rank t's).
Tensor assemble(std::vector<SafetensorsReader>& stage, const TensorRecord& record) {
  const int tp = static_cast<int>(stage.size());
  if (record.split_dim == kReplicated || tp == 1) {
    check_slice(stage[0], record, tp);
    return stage[0].read_tensor(record.name);
  }
  for (const SafetensorsReader& shard : stage)
    check_slice(shard, record, tp);
  Tensor full = Tensor::empty(record.full_shape, record.dtype, Device::cpu);
  // Row-major: the full tensor is `outer` rows, each the tp slices' `chunk` bytes side by side.
  std::int64_t outer = 1;
  for (int d = 0; d < record.split_dim; ++d)
    outer *= record.full_shape[d];
  const std::size_t chunk = outer == 0 ? 0 : full.buffer().bytes() / outer / tp;
  auto* destination = static_cast<char*>(full.buffer().data());
  for (int t = 0; t < tp; ++t) {
    const Tensor slice = stage[t].read_tensor(record.name);
    const auto* source = static_cast<const char*>(slice.buffer().data());
    for (std::int64_t o = 0; o < outer; ++o) {
      std::memcpy(destination + (o * tp + t) * chunk, source + o * chunk, chunk);
    }
  }
  return full;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.buffer().bytes() == b.buffer().bytes() &&
         std::memcmp(a.buffer().data(), b.buffer().data(), a.buffer().bytes()) == 0;
}

}  // namespace

std::map<std::string, Tensor> load_full_tensors(const std::filesystem::path& dir, std::int64_t step,
                                                const std::vector<TensorRecord>& wanted) {
  for (const TensorRecord& record : wanted) {
    const int ndim = static_cast<int>(record.full_shape.size());
    if (record.split_dim != kReplicated && (record.split_dim < 0 || record.split_dim >= ndim)) {
      throw std::invalid_argument(
          fmt::format("load_full_tensors {}: split_dim {} is not a dim of "
                      "the full shape {}",
                      record.name, record.split_dim, autograd::to_string(record.full_shape)));
    }
  }
  const nlohmann::json meta = read_meta(dir, step);
  const int tp = meta["topology"]["tp"].get<int>();
  const int pp = meta["topology"]["pp"].get<int>();
  std::vector<std::vector<SafetensorsReader>> stages(pp);  // stages[p][t]
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t)
      stages[p].push_back(open_shard(dir, step, t, p));
  }

  std::map<std::string, Tensor> result;
  for (const TensorRecord& record : wanted) {
    const SafetensorsReader* owner = nullptr;
    for (std::vector<SafetensorsReader>& stage : stages) {
      if (stage[0].find(record.name) == nullptr) continue;
      Tensor full = assemble(stage, record);
      if (owner == nullptr) {
        owner = &stage[0];
        result[record.name] = full;
      } else if (!same_bytes(full, result[record.name])) {
        mismatch(stage[0], fmt::format("tensor '{}' differs from its tied copy in {}", record.name,
                                       owner->path().string()));
      }
    }
    if (owner == nullptr) {
      throw CheckpointError(
          fmt::format("{}: no tensor '{}' in the tp rank 0 shard file of any of "
                      "the {} pp stages",
                      step_directory(dir, step).string(), record.name, pp));
    }
  }
  return result;
}

}  // namespace mpitron::nn
