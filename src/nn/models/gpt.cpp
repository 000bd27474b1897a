#include "nn/models/gpt.h"

#include <fmt/format.h>

#include <numeric>
#include <stdexcept>

#include "autograd/ops.h"
#include "autograd/recompute.h"
#include "kernels/ops.h"
#include "nn/data/zigzag.h"
#include "nn/fault_injection.h"
#include "nn/layers/tp_mappings.h"

namespace mpitron::nn {

namespace {

const ParameterSpec& spec_named(const std::vector<ParameterSpec>& specs, const std::string& name) {
  for (const ParameterSpec& spec : specs) {
    if (spec.name == name) return spec;
  }
  throw std::logic_error("GptStage: no parameter named " + name);
}

// The global positions of a shard of `seq` tokens for every sequence: int64 [batch, seq],
// 0..seq-1, or under context parallelism zigzag_positions(seq cp, cp, c).
Tensor positions(std::int64_t batch, std::int64_t seq, const ContextParallel& cp, Device device) {
  std::vector<std::int64_t> one(static_cast<std::size_t>(seq));
  std::iota(one.begin(), one.end(), std::int64_t{0});
  if (cp.size() > 1) one = zigzag_positions(seq * cp.size(), cp.size(), cp.rank());
  std::vector<std::int64_t> values;
  values.reserve(static_cast<std::size_t>(batch * seq));
  for (std::int64_t b = 0; b < batch; ++b)
    values.insert(values.end(), one.begin(), one.end());
  return Tensor::from_indices(values, {batch, seq}, device);
}

}  // namespace

GptStage::GptStage(const GptConfig& config, const MasterInit& init,
                   const comm::ParallelTopology& topology, bool sequence_parallel,
                   int virtual_stages, CpComm cp_comm, bool cp_prefetch)
    : config_(config),
      device_(Device::cpu),
      tp_(topology.tp_comm()),
      cp_{topology.cp_comm(), cp_comm, cp_prefetch},
      first_(topology.is_first_stage()),
      last_(topology.is_last_stage()),
      sequence_parallel_(sequence_parallel) {
  if (const auto error = gpt_size_error(config, topology.tp(), topology.pp(), virtual_stages)) {
    throw std::invalid_argument(*error);
  }
  const std::vector<ParameterSpec> specs = gpt_parameter_specs(config);
  const auto master = [&](const std::string& name) { return init(spec_named(specs, name)); };
  if (first_) {
    wte_.emplace(master("transformer.wte.weight"), config.vocab, tp_);
    if (!config.llama()) wpe_ = replicate(master("transformer.wpe.weight"));
  }
  const int pp = topology.pp(), stage = topology.pp_rank();
  const std::int64_t per_chunk = config.layers / (pp * virtual_stages);
  chunks_.resize(static_cast<std::size_t>(virtual_stages));
  for (int c = 0; c < virtual_stages; ++c) {
    const int virtual_stage =
        fault_active(Fault::pp_chunk_wrong_stage) ? stage * virtual_stages + c : c * pp + stage;
    for (std::int64_t i = 0; i < per_chunk; ++i) {
      chunks_[static_cast<std::size_t>(c)].emplace_back(config, virtual_stage * per_chunk + i, init,
                                                        tp_, sequence_parallel, cp_);
    }
  }
  if (last_) {
    ln_f_.emplace(master("transformer.ln_f.weight"),
                  config.llama() ? Tensor() : master("transformer.ln_f.bias"), config.norm_eps,
                  sequence_parallel);
    if (!config.tied_embeddings) {
      head_.emplace(master(kUntiedHead), config.vocab, tp_);
    } else if (!first_) {
      head_.emplace(master("transformer.wte.weight"), config.vocab, tp_);
    }
  }
  device_ = parameters().front().tensor.device();
}

Tensor GptStage::forward(const Tensor& input, int chunk) const {
  if (chunk < 0 || chunk >= virtual_stages()) {
    throw std::invalid_argument(
        fmt::format("GPT: chunk {} is outside [0, {})", chunk, virtual_stages()));
  }
  Tensor x = input;
  if (first_ && chunk == 0) {
    if (input.ndim() != 2) {
      throw std::invalid_argument(
          fmt::format("GPT: tokens {} are not [batch, seq]", autograd::to_string(input.shape())));
    }
    const std::int64_t batch = input.size(0), seq = input.size(1);
    if (seq * cp_.size() > config_.block_size) {
      throw std::invalid_argument(
          fmt::format("GPT: sequence length {} is longer than the position table (block size {})",
                      seq * cp_.size(), config_.block_size));
    }
    check_sequence_split(seq);
    x = wte_->forward(input);
    if (wpe_.defined()) {
      x = autograd::add(x, autograd::embedding(wpe_, positions(batch, seq, cp_, input.device())));
    }
    if (sequence_parallel_) x = scatter_to_sequence_parallel_region(x, tp_);
  }
  for (const TransformerBlock& block : chunks_[static_cast<std::size_t>(chunk)]) {
    x = recompute_
            ? autograd::recompute([&block](const Tensor& in) { return block.forward(in); }, x)
            : block.forward(x);
  }
  return x;
}

Tensor GptStage::logits(const Tensor& hidden, bool bf16) const {
  return head().logits(ln_f_->forward(hidden), sequence_parallel_, bf16);
}

void GptStage::check_sequence_split(std::int64_t seq) const {
  if (sequence_parallel_ && seq % tp_.size() != 0) {
    throw std::invalid_argument(
        fmt::format("GPT: sequence length {} is not divisible by tp {}", seq, tp_.size()));
  }
}

Shape GptStage::activation_shape(std::int64_t rows, std::int64_t seq) const {
  check_sequence_split(seq);
  return {rows, sequence_parallel_ ? seq / tp_.size() : seq, config_.hidden};
}

Tensor GptStage::loss(const Tensor& hidden, const Tensor& targets, double divisor) const {
  // A --bf16 run's head writes bfloat16 logits, as Megatron-LM's output layer does.
  const bool bf16 = kernels::gemm_operands() == kernels::GemmOperands::bfloat16 &&
                    hidden.dtype() == autograd::DType::f32;
  return vocab_parallel_cross_entropy(logits(hidden, bf16), targets, config_.vocab, tp_, divisor);
}

Parameters GptStage::parameters() const {
  Parameters all;
  if (first_) {
    all.push_back({"transformer.wte.weight", wte_->weight(), 0});
    if (wpe_.defined()) all.push_back({"transformer.wpe.weight", wpe_});
  }
  for (const std::vector<TransformerBlock>& chunk : chunks_) {
    for (const TransformerBlock& block : chunk) {
      const Parameters mine = block.parameters();
      all.insert(all.end(), mine.begin(), mine.end());
    }
  }
  if (last_) {
    append_parameters(all, "transformer.ln_f", ln_f_->parameters());
    if (!config_.tied_embeddings) {
      all.push_back({kUntiedHead, head_->weight(), 0});
    } else if (head_) {
      all.push_back({"transformer.wte.weight", head_->weight(), 0, /*tied_copy=*/true});
    }
  }
  return all;
}

std::int64_t parameter_count(const Parameters& parameters) {
  std::int64_t total = 0;
  for (const Parameter& p : parameters)
    total += p.tensor.numel();
  return total;
}

}  // namespace mpitron::nn
