#include "nn/models/mlp_stack.h"

#include <string>

#include "autograd/recompute.h"

namespace mpitron::nn {

template <class Layer>
Tensor MlpStack<Layer>::forward(const Tensor& x, bool recompute) const {
  Tensor y = x;
  for (const Layer& layer : layers_) {
    const autograd::Recomputable run = [&layer](const Tensor& in) { return layer.forward(in); };
    y = recompute ? autograd::recompute(run, y) : run(y);
  }
  return y;
}

template <class Layer>
Parameters MlpStack<Layer>::parameters() const {
  Parameters all;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    append_parameters(all, "layer" + std::to_string(first_ + static_cast<std::int64_t>(i)),
                      layers_[i].parameters());
  }
  return all;
}

template class MlpStack<Mlp>;
template class MlpStack<ParallelMlp>;

}  // namespace mpitron::nn
