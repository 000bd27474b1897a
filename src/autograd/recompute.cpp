#include "autograd/recompute.h"

#include "autograd/function.h"

namespace mpitron::autograd {

namespace {

class Recompute final : public Function {
 public:
  Recompute(Recomputable fn, Tensor x, bool x_needs_grad)
      : fn_(std::move(fn)), x_(std::move(x)), x_needs_grad_(x_needs_grad) {}
  std::string name() const override { return "recompute"; }
  std::vector<Tensor> backward(const Tensor& grad_output) override {
    Tensor input = x_.detach();
    if (x_needs_grad_) input.set_requires_grad();
    GradModeGuard enable_grad(true);  // backward may run under NoGradGuard
    const Tensor output = fn_(input);
    if (output.requires_grad()) output.backward(grad_output);
    return {x_needs_grad_ ? input.grad() : Tensor()};
  }
  void release_saved() override {
    fn_ = nullptr;
    x_ = Tensor();
  }

 private:
  Recomputable fn_;
  Tensor x_;
  bool x_needs_grad_;
};

}  // namespace

Tensor recompute(const Recomputable& fn, const Tensor& x) {
  if (!grad_enabled()) return fn(x);
  Tensor output;
  {
    NoGradGuard no_grad;
    output = fn(x).detach();
  }
  const bool x_needs_grad = x.requires_grad();
  // A stand-in input that requires grad makes `attach` record the node when x does not.
  const Tensor edge = x_needs_grad ? x : x.detach().set_requires_grad();
  return attach(output, std::make_shared<Recompute>(fn, x.detach(), x_needs_grad), {edge});
}

}  // namespace mpitron::autograd
