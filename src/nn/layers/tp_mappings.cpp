#include "nn/layers/tp_mappings.h"

#include <fmt/format.h>

#include <stdexcept>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/collectives.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

Tensor all_reduced_copy(const Tensor& x, const comm::Communicator& tp) {
  Tensor y = x.clone();
  comm::all_reduce(tp, y.buffer(), comm::ReduceOp::sum);
  return y;
}

Tensor all_gathered_last_dim(const Tensor& x, const comm::Communicator& tp) {
  autograd::Shape shape = x.shape();
  const auto rows = static_cast<std::size_t>(x.numel() / shape.back());
  shape.back() *= tp.size();
  Tensor y = Tensor::empty(shape, x.dtype(), x.device());
  comm::all_gather(tp, x.buffer(), y.buffer(), rows);
  return y;
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

}  // namespace mpitron::nn
