#include "nn/layers/tp_mappings.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/collectives.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

// True when x crosses `tp` as bfloat16: a float32 tensor on more than one rank under bfloat16 GEMM
// operands (train --bf16), as Megatron-LM's bfloat16 activations and their gradients do. A
// reduction of a CUDA tensor that MPI reads directly stays float32: comm reduces bfloat16 on host
// memory only (docs/comm.md, "bfloat16 reductions").
bool wire_is_bf16(autograd::Device device, const comm::Communicator& tp, bool reduces) {
  return kernels::gemm_operands() == kernels::GemmOperands::bfloat16 && tp.size() > 1 &&
         !(reduces && device == autograd::Device::cuda && tp.direct_transfers());
}

bool crosses_as_bf16(const Tensor& x, const comm::Communicator& tp, bool reduces) {
  return x.dtype() == autograd::DType::f32 && wire_is_bf16(x.device(), tp, reduces);
}

// What a mapping's collective does with x: gathers it, or sums it into this rank's part or into
// a result of x's size.
enum class Collective { gather, reduce_scatter, all_reduce };

// A new tensor of `shape` (x's dtype and device) that `run(in, out)` fills from x: from x's own
// elements, or, when x crosses as bfloat16, from x rounded to bfloat16 (round to nearest even)
// into a bfloat16 result that is widened exactly. A sum also takes a bfloat16 x (a row-parallel
// partial written as bfloat16, reduces_as_bf16): sent as it is, its result float32. An
// all-reduce gets the bfloat16 copy as both `in` and `out`, and runs in place.
template <class Run>
Tensor collected(const char* what, const Tensor& x, const comm::Communicator& tp,
                 const autograd::Shape& shape, Collective kind, Run run) {
  const bool reduces = kind != Collective::gather;
  const bool bf16_input = x.dtype() == autograd::DType::bf16;
  if (bf16_input && !(reduces && wire_is_bf16(x.device(), tp, true))) {
    throw std::invalid_argument(fmt::format(
        "{}: a bfloat16 input is a sum's partial: it needs bfloat16 GEMM operands, tp > 1 and a "
        "host reduction",
        what));
  }
  Tensor y = Tensor::empty(shape, bf16_input ? autograd::DType::f32 : x.dtype(), x.device());
  if (!bf16_input && !crosses_as_bf16(x, tp, reduces)) {
    run(x.buffer(), y.buffer());
    return y;
  }
  // What goes out: x rounded, a copy of a bfloat16 x for the all-reduce to sum in place, or a
  // bfloat16 x itself.
  kernels::Buffer own;
  if (!bf16_input || kind == Collective::all_reduce) {
    own = kernels::Buffer(x.numel(), kernels::DType::bf16, x.device());
    if (bf16_input) {
      kernels::copy(x.buffer(), own);
    } else {
      kernels::convert(x.buffer(), own);
    }
  }
  if (kind == Collective::all_reduce) {
    run(own, own);
    kernels::convert(own, y.buffer());
    return y;
  }
  kernels::Buffer received(y.numel(), kernels::DType::bf16, x.device());
  run(bf16_input ? x.buffer() : own, received);
  kernels::convert(received, y.buffer());
  return y;
}

// x summed over `tp` into a new tensor, or x itself on one rank.
Tensor all_reduced_copy(const Tensor& x, const comm::Communicator& tp) {
  if (tp.size() == 1 && x.dtype() != autograd::DType::bf16) return x.detach();
  return collected("reduce_from_tp", x, tp, x.shape(), Collective::all_reduce,
                   [&](const kernels::Buffer& in, kernels::Buffer& out) {
                     if (&in != &out) kernels::copy(in, out);
                     comm::all_reduce(tp, out, comm::ReduceOp::sum);
                   });
}

// The product of x's dims before `dim`: all_gather's and reduce_scatter's `outer`.
std::size_t outer_of(const Tensor& x, int dim) {
  std::int64_t outer = 1;
  for (int d = 0; d < dim; ++d)
    outer *= x.size(d);
  return static_cast<std::size_t>(outer);
}

void check_sequence_dim(const char* what, const Tensor& x, int divisor) {
  if (x.ndim() != 3 || x.size(1) % divisor != 0) {
    throw std::invalid_argument(
        fmt::format("{}: {} is not [batch, seq, hidden] with seq divisible by tp {}", what,
                    autograd::to_string(x.shape()), divisor));
  }
}

// x gathered over `tp` along `dim`, rank r's part at block r of that dim.
Tensor all_gathered(const Tensor& x, const comm::Communicator& tp, int dim) {
  autograd::Shape shape = x.shape();
  shape[static_cast<std::size_t>(dim)] *= tp.size();
  return collected("all_gather", x, tp, shape, Collective::gather,
                   [&](const kernels::Buffer& in, kernels::Buffer& out) {
                     comm::all_gather(tp, in, out, outer_of(x, dim));
                   });
}

Tensor all_gathered_last_dim(const Tensor& x, const comm::Communicator& tp) {
  return all_gathered(x, tp, x.ndim() - 1);
}

Tensor all_gathered_sequence(const Tensor& x, const comm::Communicator& tp) {
  check_sequence_dim("gather_from_sequence_parallel_region", x, 1);
  return all_gathered(x, tp, 1);
}

Tensor reduce_scattered_sequence(const Tensor& x, const comm::Communicator& tp) {
  check_sequence_dim("reduce_scatter_to_sequence_parallel_region", x, tp.size());
  autograd::Shape shape = x.shape();
  shape[1] /= tp.size();
  return collected("reduce_scatter_to_sequence_parallel_region", x, tp, shape,
                   Collective::reduce_scatter,
                   [&](const kernels::Buffer& in, kernels::Buffer& out) {
                     comm::reduce_scatter(tp, in, out, outer_of(x, 1));
                   });
}

Tensor own_rows_of_sequence(const Tensor& x, const comm::Communicator& tp) {
  check_sequence_dim("scatter_to_sequence_parallel_region", x, tp.size());
  const std::int64_t rows = x.size(1) / tp.size();
  autograd::NoGradGuard no_grad;
  return autograd::narrow(x, 1, tp.rank() * rows, rows);
}

Tensor all_reduced_copy_5_percent_high(const Tensor& x, const comm::Communicator& tp) {
  return autograd::scale(all_reduced_copy(x, tp), 1.05);
}

Tensor own_shard_of_last_dim(const Tensor& x, const comm::Communicator& tp) {
  if (x.ndim() < 1 || x.size(-1) % tp.size() != 0) {
    throw std::invalid_argument(
        fmt::format("scatter_to_tp: last dim of {} is not divisible by tp {}",
                    autograd::to_string(x.shape()), tp.size()));
  }
  const std::int64_t width = x.size(-1) / tp.size();
  autograd::NoGradGuard no_grad;
  return autograd::narrow(x, -1, tp.rank() * width, width);
}

// A TP mapping: `forward_op` is applied to the input, `backward_op` to the output gradient.
class Mapping final : public autograd::Function {
 public:
  using Op = Tensor (*)(const Tensor&, const comm::Communicator&);
  Mapping(const char* name, Op backward_op, const comm::Communicator& tp)
      : name_(name), backward_op_(backward_op), tp_(tp) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    return {backward_op_(grad_output, tp_)};
  }

 private:
  const char* name_;
  Op backward_op_;
  comm::Communicator tp_;
};

Tensor identity(const Tensor& x, const comm::Communicator&) {
  return x.detach();
}

Tensor apply(const char* name, Mapping::Op forward_op, Mapping::Op backward_op, const Tensor& x,
             const comm::Communicator& tp) {
  return autograd::attach(forward_op(x, tp), std::make_shared<Mapping>(name, backward_op, tp), {x});
}

}  // namespace

bool reduces_as_bf16(autograd::Device device, const comm::Communicator& tp) {
  return wire_is_bf16(device, tp, true);
}

Tensor copy_to_tp(const Tensor& x, const comm::Communicator& tp) {
  const Mapping::Op backward = fault_active(Fault::copy_to_tp_no_all_reduce) ? Mapping::Op{identity}
                               : fault_active(Fault::tp_input_grad_off_5_percent)
                                   ? Mapping::Op{all_reduced_copy_5_percent_high}
                                   : Mapping::Op{all_reduced_copy};
  return apply("copy_to_tp", identity, backward, x, tp);
}

Tensor reduce_from_tp(const Tensor& x, const comm::Communicator& tp) {
  return apply("reduce_from_tp", all_reduced_copy, identity, x, tp);
}

Tensor gather_from_tp(const Tensor& x, const comm::Communicator& tp) {
  return apply("gather_from_tp", all_gathered_last_dim, own_shard_of_last_dim, x, tp);
}

Tensor scatter_to_tp(const Tensor& x, const comm::Communicator& tp) {
  return apply("scatter_to_tp", own_shard_of_last_dim, all_gathered_last_dim, x, tp);
}

Tensor gather_from_sequence_parallel_region(const Tensor& x, const comm::Communicator& tp) {
  return apply("gather_from_sequence_parallel_region", all_gathered_sequence,
               reduce_scattered_sequence, x, tp);
}

Tensor reduce_scatter_to_sequence_parallel_region(const Tensor& x, const comm::Communicator& tp) {
  return apply("reduce_scatter_to_sequence_parallel_region", reduce_scattered_sequence,
               all_gathered_sequence, x, tp);
}

Tensor scatter_to_sequence_parallel_region(const Tensor& x, const comm::Communicator& tp) {
  return apply("scatter_to_sequence_parallel_region", own_rows_of_sequence, all_gathered_sequence,
               x, tp);
}

Tensor enter_tp_region(const Tensor& x, const comm::Communicator& tp, bool sequence_parallel) {
  return sequence_parallel ? gather_from_sequence_parallel_region(x, tp) : copy_to_tp(x, tp);
}

Tensor exit_tp_region(const Tensor& partial, const comm::Communicator& tp, bool sequence_parallel) {
  return sequence_parallel ? reduce_scatter_to_sequence_parallel_region(partial, tp)
                           : reduce_from_tp(partial, tp);
}

}  // namespace mpitron::nn
