#include "nn/parallel/gradients.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

void finalize_gradients(const Parameters& parameters, const comm::ParallelTopology& topology,
                        DataParallelGradients& gradients, bool tied_embeddings) {
  gradients.finish();
  if (tied_embeddings && topology.pp() > 1 && !fault_active(Fault::embedding_group_not_reduced)) {
    for (const Parameter& p : parameters) {
      if (p.name != kTiedEmbedding) continue;
      Tensor grad = p.tensor.grad();  // a view of the DP gradient buffer: always defined
      comm::all_reduce(topology.embedding_comm(), grad.buffer(), comm::ReduceOp::sum);
    }
  }
  sum_sequence_parallel_gradients(parameters, topology.tp_comm());
}

void sum_sequence_parallel_gradients(const Parameters& parameters, const comm::Communicator& tp) {
  for (const Parameter& p : parameters) {
    Tensor grad = p.tensor.grad();
    if (!p.sequence_parallel || !grad.defined()) continue;
    const bool layer_norm = p.name.find("ln_") != std::string::npos;
    if (layer_norm && fault_active(Fault::sequence_parallel_layer_norm_grad_not_summed)) continue;
    comm::all_reduce(tp, grad.buffer(), comm::ReduceOp::sum);
  }
}

namespace {

// sum(x^2) of each of `ranges`, in order. Each lands in its own element of one tensor per
// (dtype, device), and each tensor is read back once: on CUDA one synchronisation per step, not
// one per parameter. (The values are those of one sum_squares call per range.)
std::vector<double> squared_norms(const std::vector<kernels::Buffer>& ranges) {
  std::vector<std::pair<kernels::DType, kernels::Device>> kinds;
  std::vector<std::int64_t> counts;
  std::vector<std::pair<std::size_t, std::int64_t>> places;  // (kind, element) of each range
  for (const kernels::Buffer& range : ranges) {
    const std::pair kind{range.dtype(), range.device()};
    const auto found = std::find(kinds.begin(), kinds.end(), kind);
    const auto k = static_cast<std::size_t>(found - kinds.begin());
    if (found == kinds.end()) {
      kinds.push_back(kind);
      counts.push_back(0);
    }
    places.emplace_back(k, counts[k]++);
  }
  std::vector<Tensor> squares;
  for (std::size_t k = 0; k < kinds.size(); ++k)
    squares.push_back(Tensor::empty({counts[k]}, kinds[k].first, kinds[k].second));
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    kernels::Buffer out = kernels::Buffer::view(squares[places[i].first].buffer(),
                                                static_cast<std::size_t>(places[i].second), 1);
    kernels::sum_squares(ranges[i], out);
  }
  std::vector<std::vector<double>> values;
  for (const Tensor& t : squares)
    values.push_back(t.to_vector());
  std::vector<double> norms;
  for (const auto& [k, element] : places)
    norms.push_back(values[k][static_cast<std::size_t>(element)]);
  return norms;
}

}  // namespace

double global_gradient_norm(const Parameters& parameters, const comm::ParallelTopology& topology,
                            const std::vector<ElementRange>* owned) {
  const bool count_replicated =
      topology.tp_rank() == 0 || fault_active(Fault::norm_counts_replicas_per_rank);
  std::vector<kernels::Buffer> counted;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const Parameter& p = parameters[i];
    Tensor grad = p.tensor.grad();
    if (!grad.defined() || p.tied_copy) continue;
    if (p.split_dim == kReplicated && !count_replicated) continue;
    const ElementRange range = owned != nullptr ? owned->at(i) : ElementRange{0, grad.numel()};
    if (range.size() == 0) continue;
    counted.push_back(kernels::Buffer::view(grad.buffer(), static_cast<std::size_t>(range.begin),
                                            static_cast<std::size_t>(range.size())));
  }
  double sum = 0.0;
  for (const double squares : squared_norms(counted))
    sum += squares;
  kernels::Buffer total(1, kernels::DType::f64, kernels::Device::cpu);
  total.data_as<double>()[0] = sum;
  comm::all_reduce(topology.tp_comm(), total, comm::ReduceOp::sum);
  comm::all_reduce(topology.pp_comm(), total, comm::ReduceOp::sum);
  if (owned != nullptr) comm::all_reduce(topology.dp_cp_comm(), total, comm::ReduceOp::sum);
  return std::sqrt(total.data_as<double>()[0]);
}

void clip_gradients(const Parameters& parameters, double norm, double max_norm,
                    const std::vector<ElementRange>* owned) {
  if (max_norm <= 0.0) return;
  const double coefficient = std::min(1.0, max_norm / (norm + 1e-6));
  if (coefficient == 1.0) return;  // x * 1 is x: skipping the pass changes no bit
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    Tensor grad = parameters[i].tensor.grad();
    if (!grad.defined()) continue;
    const ElementRange range = owned != nullptr ? owned->at(i) : ElementRange{0, grad.numel()};
    if (range.size() == 0) continue;
    kernels::Buffer scaled =
        kernels::Buffer::view(grad.buffer(), static_cast<std::size_t>(range.begin),
                              static_cast<std::size_t>(range.size()));
    kernels::scale(scaled, coefficient, scaled);
  }
}

}  // namespace mpitron::nn
