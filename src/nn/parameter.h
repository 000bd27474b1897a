// Named parameters and deterministic, TP-independent initialization.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "comm/communicator.h"

namespace mpitron::nn {

using autograd::Device;
using autograd::DType;
using autograd::Shape;
using autograd::Tensor;

/// `split_dim` of a parameter that every TP rank holds whole.
inline constexpr int kReplicated = -1;

/// A trainable tensor (a leaf with requires_grad), its name (e.g. "layer2.fc1.weight") and how
/// it is laid out over the tensor-parallel group. Checks, gradient clipping and checkpoints read
/// this record, never a position in a list.
struct Parameter {
  std::string name;
  Tensor tensor;
  /// kReplicated, or the dim along which the full tensor is cut into tp equal slices, TP rank t
  /// holding slice t (e.g. 0 for a column-parallel weight [out/tp, in], 1 for a row-parallel
  /// weight [out, in/tp]). The full shape is the shard's shape with this dim times tp.
  int split_dim = kReplicated;
  /// True for a second copy of a parameter that another stage owns (the LM head's tied token
  /// embedding on the last pipeline stage): it trains like any parameter, but norms and
  /// checkpoints count the owner's copy only.
  bool tied_copy = false;
  /// True for a replicated parameter that sequence parallelism applies to only this TP rank's
  /// seq/tp rows (LayerNorm weights and biases, row-parallel biases): each TP rank's gradient is
  /// a partial sum, and finalize_gradients sums it over TP (Megatron-LM's `sequence_parallel`
  /// attribute; Korthikanti et al. 2022, arXiv:2205.05198, sec. 4.2.2).
  bool sequence_parallel = false;
};

using Parameters = std::vector<Parameter>;

/// Elements [begin, end) of a tensor in row-major order: e.g. the part of a parameter whose
/// update a data-parallel rank owns under the distributed optimizer.
struct ElementRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const ElementRange&) const = default;
};

/// Appends `more` to `into`, prefixing each name with `prefix` + "." (layouts are kept).
void append_parameters(Parameters& into, const std::string& prefix, const Parameters& more);

/// The full (unsharded) weights of one linear layer: weight [out, in], bias [out], or no bias
/// (an undefined tensor: the layer adds none and has no "bias" parameter).
struct LinearWeights {
  Tensor weight;
  Tensor bias;
};

/// Master weights made from `seed` on every rank: weight ~ N(0, 1/in_features) from seed (LeCun
/// normal, so activations keep their scale through deep stacks of any width), bias ~ N(0, 0.1^2)
/// from seed + 10000 (the reference program's seed scheme). Identical for every (tp, pp, dp), so
/// each rank can slice its shard from the same dense model. Throws std::invalid_argument when a
/// size is < 1.
LinearWeights make_linear_weights(std::int64_t out_features, std::int64_t in_features,
                                  std::uint64_t seed, DType dtype, Device device);

/// A new parameter holding slice `index` of `parts` equal slices of `master` along `dim`.
/// Throws std::invalid_argument "<what>: <dim extent> is not divisible by tp <parts>".
Tensor shard(const Tensor& master, int dim, int index, int parts, const std::string& what);

/// Slice `index` of `parts` equal slices of `full` along `split_dim` (a view-free copy, no grad
/// history), or `full` itself when split_dim is kReplicated: the part of a full tensor that a
/// TP rank's parameter of that layout corresponds to (e.g. to compare a shard's gradient with a
/// dense model's).
Tensor tp_slice(const Tensor& full, int split_dim, int index, int parts);

/// A new parameter holding a copy of `master`.
Tensor replicate(const Tensor& master);

/// Rounds every element of every parameter in `parameters` to bfloat16 (to nearest, ties to
/// even) in place, keeping the float32 storage: the values `train --bf16`'s parameters hold
/// (Optimizer::keep_float32_masters rounds them with the same kernels::round_to_bf16). The
/// tensors are shared handles, so the layers that hold them see the rounded values. A value
/// beyond bfloat16's largest finite one becomes infinite. Throws std::invalid_argument (naming
/// the parameter) for a parameter that is not float32.
void round_parameters_to_bf16(const Parameters& parameters);

/// Whether every element of `tensor` is finite (no NaN, no infinity), read in place on the CPU
/// (a float32 or float64 tensor elsewhere is copied to the host first; other dtypes are widened).
bool all_finite(const Tensor& tensor);

/// After round_parameters_to_bf16 or Optimizer::keep_float32_masters under --bf16: throws
/// comm::ConfigError on every rank of `world` when a parameter of any rank holds a value that is
/// not finite, as a float32 weight beyond bfloat16's largest finite value (3.3895e38) is once
/// rounded (the loaders refuse NaN and infinity in files, so the rounding made it): the forward
/// would compute NaN. Names the world ranks that hold such a parameter and this rank's first
/// one. Collective over `world`.
void refuse_infinite_bf16_parameters(const Parameters& parameters, const comm::Communicator& world);

}  // namespace mpitron::nn
