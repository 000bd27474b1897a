// Global-norm clipping (nn/parallel/gradients.h) through one SGD step: with the limit above the
// norm the step is the unclipped step, bit for bit; below it every gradient is scaled by
// limit / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_), or only the owned elements when the
// distributed optimizer passes its shards. SGD shows the scale that AdamW would
// hide, so a clip that scales small gradients up fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "nn/optim/sgd.h"
#include "nn/parallel/gradients.h"

namespace mpitron::nn {
namespace {

// Two parameters whose gradients are known: w [2, 2] gets 3 * ones, b [2] gets (4, -4); the
// norm is sqrt(4 * 9 + 2 * 16) = sqrt(68).
struct Model {
  Tensor w = Tensor::full({2, 2}, 1.0, DType::f64).set_requires_grad();
  Tensor b = Tensor::full({2}, 2.0, DType::f64).set_requires_grad();
  Model() {
    autograd::add(
        autograd::sum(autograd::scale(w, 3.0)),
        autograd::sum(autograd::mul(b, Tensor::from_vector({4.0, -4.0}, {2}, DType::f64))))
        .backward();
  }
  Parameters parameters() const { return {{"w", w}, {"b", b}}; }
};

// The parameters after clipping at `limit` and one SGD step of lr 0.5.
std::vector<std::vector<double>> sgd_step_clipped_at(double limit) {
  const Model model;
  clip_gradients(model.parameters(), std::sqrt(68.0), limit);
  Sgd sgd(model.parameters(), 0.5);
  sgd.step();
  return {model.w.to_vector(), model.b.to_vector()};
}

TEST(ClipGradients, AboveTheNormTheStepIsTheUnclippedStep) {
  const std::vector<std::vector<double>> expected{{1.0 - 1.5, 1.0 - 1.5, 1.0 - 1.5, 1.0 - 1.5},
                                                  {2.0 - 2.0, 2.0 + 2.0}};
  EXPECT_EQ(sgd_step_clipped_at(9.0), expected);  // 9 > sqrt(68) = 8.246
  EXPECT_EQ(sgd_step_clipped_at(1e9), expected);
}

TEST(ClipGradients, BelowTheNormEveryGradientIsScaledToTheLimit) {
  const double scale = 2.0 / (std::sqrt(68.0) + 1e-6);
  const std::vector<std::vector<double>> step = sgd_step_clipped_at(2.0);
  for (const double w : step[0])
    EXPECT_DOUBLE_EQ(w, 1.0 - 0.5 * 3.0 * scale);
  EXPECT_DOUBLE_EQ(step[1][0], 2.0 - 0.5 * 4.0 * scale);
  EXPECT_DOUBLE_EQ(step[1][1], 2.0 + 0.5 * 4.0 * scale);
}

TEST(ClipGradients, WithOwnedRangesOnlyThoseElementsAreScaled) {
  const Model model;
  const std::vector<ElementRange> owned{{1, 3}, {0, 0}};  // w's elements 1 and 2, none of b
  const double scale = 2.0 / (std::sqrt(68.0) + 1e-6);
  clip_gradients(model.parameters(), std::sqrt(68.0), 2.0, &owned);
  const std::vector<double> w_grad = model.w.grad().to_vector();
  EXPECT_EQ(w_grad[0], 3.0);
  EXPECT_DOUBLE_EQ(w_grad[1], 3.0 * scale);
  EXPECT_DOUBLE_EQ(w_grad[2], 3.0 * scale);
  EXPECT_EQ(w_grad[3], 3.0);
  EXPECT_EQ(model.b.grad().to_vector(), (std::vector<double>{4.0, -4.0}));
}

TEST(ClipGradients, ALimitOfZeroTurnsClippingOff) {
  EXPECT_EQ(sgd_step_clipped_at(0.0), sgd_step_clipped_at(1e9));
}

}  // namespace
}  // namespace mpitron::nn
