// The MLP-stack model of `mpitron validate` and `mpitron bench`: `layers` transformer MLPs
// applied in order to [batch, seq, hidden] activations, whole (dense) or as the layers one
// pipeline stage holds, each layer dense (nn::Mlp) or tensor-parallel (nn::ParallelMlp).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layers/mlp.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// How an MLP stack's master weights are made: layer i has fc1 [intermediate, hidden] from seed
/// fc1_seed + i and fc2 [hidden, intermediate] from fc2_seed + i (make_mlp_weights), so the
/// layers a stage holds equal the same layers of the whole stack.
struct MlpStackInit {
  std::int64_t hidden = 0;
  std::int64_t intermediate = 0;
  std::uint64_t fc1_seed = 0;
  std::uint64_t fc2_seed = 0;
  DType dtype = DType::f32;
  Device device = Device::cpu;
};

/// Consecutive MLP layers of a stack, starting at layer `first` of the whole stack. Layer is
/// nn::Mlp or nn::ParallelMlp (instantiated for both).
template <class Layer>
class MlpStack {
 public:
  /// Layers [first, first + count) of the stack `init` describes, each built as
  /// Layer(master weights, extra...) (e.g. the TP communicator of ParallelMlp). A layer's master
  /// weights are made and dropped one at a time, so at most one layer's exist at once.
  template <class... Extra>
  MlpStack(const MlpStackInit& init, std::int64_t first, std::int64_t count, const Extra&... extra)
      : first_(first) {
    for (std::int64_t i = first; i < first + count; ++i) {
      const auto index = static_cast<std::uint64_t>(i);
      layers_.emplace_back(make_mlp_weights(init.hidden, init.intermediate, init.fc1_seed + index,
                                            init.fc2_seed + index, init.dtype, init.device),
                           extra...);
    }
  }

  /// x [..., hidden] through every layer in order -> [..., hidden]. With `recompute` each layer
  /// keeps only its input and recomputes its activations in backward (autograd::recompute).
  Tensor forward(const Tensor& x, bool recompute = false) const;

  /// Every layer's parameters, named "layer<k>.fc1.weight", ... with k the layer's index in the
  /// whole stack (first + i); shapes and layouts as the Layer's parameters().
  Parameters parameters() const;

 private:
  std::int64_t first_;
  std::vector<Layer> layers_;
};

extern template class MlpStack<Mlp>;
extern template class MlpStack<ParallelMlp>;

}  // namespace mpitron::nn
