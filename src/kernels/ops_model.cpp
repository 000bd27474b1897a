// The public ops of the transformer model and its optimizer: LayerNorm, embedding, the
// cross-entropy pieces, AdamW and the sum of squares. Validate, then hand to the backend.
#include <cmath>
#include <string>

#include "kernels/backend.h"
#include "kernels/checks.h"
#include "kernels/ops.h"

namespace mpitron::kernels {
using namespace checks;

void layer_norm_forward(const Buffer& x, const Buffer& weight, const Buffer& bias, std::size_t cols,
                        double eps, Buffer& y, Buffer& xhat, Buffer& rstd) {
  constexpr const char* op = "layer_norm_forward";
  Backend& be =
      same_place_kept(op, {{"xhat", xhat}},
                      {{"x", x}, {"weight", weight}, {"bias", bias}, {"y", y}, {"rstd", rstd}});
  expect_rows_of(op, {"x", x}, cols);
  expect_numel(op, {"weight", weight}, cols, "cols");
  expect_numel(op, {"bias", bias}, cols, "cols");
  expect_numel(op, {"y", y}, x.numel(), "numel of x");
  expect_numel(op, {"xhat", xhat}, x.numel(), "numel of x");
  const std::size_t rows = cols == 0 ? 0 : x.numel() / cols;
  expect_numel(op, {"rstd", rstd}, rows, "rows of x");
  if (!(eps >= 0.0)) fail(op, "eps must be >= 0, got " + std::to_string(eps));
  if (rows > 0) be.layer_norm_forward(x, weight, bias, cols, eps, y, xhat, rstd);
}

void layer_norm_backward(const Buffer& xhat, const Buffer& weight, const Buffer& rstd,
                         const Buffer& dy, std::size_t cols, Buffer& dx, Buffer& dweight,
                         Buffer& dbias) {
  constexpr const char* op = "layer_norm_backward";
  Backend& be = same_place_kept(op, {{"xhat", xhat}},
                                {{"dy", dy},
                                 {"weight", weight},
                                 {"rstd", rstd},
                                 {"dx", dx},
                                 {"dweight", dweight},
                                 {"dbias", dbias}});
  expect_rows_of(op, {"xhat", xhat}, cols);
  expect_numel(op, {"weight", weight}, cols, "cols");
  const std::size_t rows = cols == 0 ? 0 : xhat.numel() / cols;
  expect_numel(op, {"rstd", rstd}, rows, "rows of xhat");
  expect_numel(op, {"dy", dy}, xhat.numel(), "numel of xhat");
  expect_numel(op, {"dx", dx}, xhat.numel(), "numel of xhat");
  expect_numel(op, {"dweight", dweight}, cols, "cols");
  expect_numel(op, {"dbias", dbias}, cols, "cols");
  if (rows == 0) {
    fill(dweight, 0.0);
    fill(dbias, 0.0);
    return;
  }
  be.layer_norm_backward(xhat, weight, rstd, dy, cols, dx, dweight, dbias);
}

void embedding_forward(const Buffer& weight, std::size_t cols, const Buffer& indices,
                       std::int64_t first_row, Buffer& out) {
  constexpr const char* op = "embedding_forward";
  Backend& be = same_place(op, {{"weight", weight}, {"out", out}});
  expect_rows_of(op, {"weight", weight}, cols);
  expect_indices(op, {"indices", indices}, weight.device(), indices.numel());
  expect_numel(op, {"out", out}, indices.numel() * cols, "numel of indices * cols");
  if (!out.empty()) be.embedding_forward(weight, cols, indices, first_row, out);
}

void embedding_backward(const Buffer& dout, const Buffer& indices, std::int64_t first_row,
                        std::size_t cols, Buffer& dweight) {
  constexpr const char* op = "embedding_backward";
  Backend& be = same_place(op, {{"dout", dout}, {"dweight", dweight}});
  expect_rows_of(op, {"dweight", dweight}, cols);
  expect_indices(op, {"indices", indices}, dout.device(), indices.numel());
  expect_numel(op, {"dout", dout}, indices.numel() * cols, "numel of indices * cols");
  if (!dout.empty() && !dweight.empty()) {
    be.embedding_backward(dout, indices, first_row, cols, dweight);
  }
}

namespace {

// Throws when more columns are used than a row has.
void expect_used_cols(const char* op, std::size_t cols, std::size_t used_cols) {
  if (used_cols > cols) {
    fail(op, "used_cols " + std::to_string(used_cols) + " is more than the " +
                 std::to_string(cols) + " columns");
  }
}

// Throws unless the cross-entropy divisor is a finite number >= 0.
void expect_divisor(const char* op, double divisor) {
  if (!(divisor >= 0.0 && std::isfinite(divisor))) {
    fail(op, "divisor must be a finite number >= 0, got " + std::to_string(divisor));
  }
}

}  // namespace

void row_max(const Buffer& x, std::size_t cols, std::size_t used_cols, Buffer& out) {
  Backend& be = same_place("row_max", {{"x", x}, {"out", out}});
  expect_rows_of("row_max", {"x", x}, cols);
  expect_used_cols("row_max", cols, used_cols);
  expect_numel("row_max", {"out", out}, cols == 0 ? 0 : x.numel() / cols, "rows of x");
  if (!out.empty()) be.row_max(x, cols, used_cols, out);
}

namespace {

// The checks shared by cross_entropy_stats and cross_entropy_backward; returns the rows.
std::size_t check_logits(const char* op, const Buffer& logits, std::size_t cols,
                         const Buffer& targets, const Buffer& row_max, const Buffer& sum_exp) {
  expect_rows_of(op, {"logits", logits}, cols);
  const std::size_t rows = cols == 0 ? 0 : logits.numel() / cols;
  expect_indices(op, {"targets", targets}, logits.device(), rows);
  expect_numel(op, {"row_max", row_max}, rows, "rows of logits");
  expect_numel(op, {"sum_exp", sum_exp}, rows, "rows of logits");
  return rows;
}

}  // namespace

void cross_entropy_stats(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                         const Buffer& targets, std::int64_t first_col, const Buffer& row_max,
                         Buffer& sum_exp, Buffer& target_logit) {
  constexpr const char* op = "cross_entropy_stats";
  Backend& be = same_place(op, {{"logits", logits},
                                {"row_max", row_max},
                                {"sum_exp", sum_exp},
                                {"target_logit", target_logit}});
  const std::size_t rows = check_logits(op, logits, cols, targets, row_max, sum_exp);
  expect_used_cols(op, cols, used_cols);
  expect_numel(op, {"target_logit", target_logit}, rows, "rows of logits");
  if (rows > 0) {
    be.cross_entropy_stats(logits, cols, used_cols, targets, first_col, row_max, sum_exp,
                           target_logit);
  }
}

void cross_entropy_loss(const Buffer& row_max, const Buffer& sum_exp, const Buffer& target_logit,
                        const Buffer& targets, double divisor, Buffer& loss) {
  constexpr const char* op = "cross_entropy_loss";
  Backend& be = same_place(
      op,
      {{"row_max", row_max}, {"sum_exp", sum_exp}, {"target_logit", target_logit}, {"loss", loss}});
  expect_numel(op, {"sum_exp", sum_exp}, row_max.numel(), "numel of row_max");
  expect_numel(op, {"target_logit", target_logit}, row_max.numel(), "numel of row_max");
  expect_indices(op, {"targets", targets}, row_max.device(), row_max.numel());
  expect_numel(op, {"loss", loss}, 1, "a scalar");
  expect_divisor(op, divisor);
  be.cross_entropy_loss(row_max, sum_exp, target_logit, targets, divisor, loss);
}

void cross_entropy_backward(const Buffer& logits, std::size_t cols, std::size_t used_cols,
                            const Buffer& targets, std::int64_t first_col, const Buffer& row_max,
                            const Buffer& sum_exp, const Buffer& dloss, double divisor,
                            Buffer& dlogits) {
  constexpr const char* op = "cross_entropy_backward";
  Backend& be = same_place(op, {{"logits", logits},
                                {"row_max", row_max},
                                {"sum_exp", sum_exp},
                                {"dloss", dloss},
                                {"dlogits", dlogits}});
  check_logits(op, logits, cols, targets, row_max, sum_exp);
  expect_used_cols(op, cols, used_cols);
  expect_numel(op, {"dloss", dloss}, 1, "a scalar");
  expect_numel(op, {"dlogits", dlogits}, logits.numel(), "numel of logits");
  expect_divisor(op, divisor);
  if (!dlogits.empty()) {
    be.cross_entropy_backward(logits, cols, used_cols, targets, first_col, row_max, sum_exp, dloss,
                              divisor, dlogits);
  }
}

void adamw_update(Buffer& param, const Buffer& grad, Buffer& exp_avg, Buffer& exp_avg_sq, double lr,
                  double beta1, double beta2, double eps, double weight_decay, std::int64_t step) {
  constexpr const char* op = "adamw_update";
  Backend& be = same_place(
      op, {{"param", param}, {"grad", grad}, {"exp_avg", exp_avg}, {"exp_avg_sq", exp_avg_sq}});
  expect_numel(op, {"grad", grad}, param.numel(), "numel of param");
  expect_numel(op, {"exp_avg", exp_avg}, param.numel(), "numel of param");
  expect_numel(op, {"exp_avg_sq", exp_avg_sq}, param.numel(), "numel of param");
  if (step < 1) fail(op, "step must be >= 1, got " + std::to_string(step));
  const auto check_at_least_zero = [&](const char* name, double value) {
    if (!(value >= 0.0))
      fail(op, std::string(name) + " must be >= 0, got " + std::to_string(value));
  };
  check_at_least_zero("lr", lr);
  check_at_least_zero("eps", eps);
  check_at_least_zero("weight_decay", weight_decay);
  for (const auto& [name, beta] : {std::pair{"beta1", beta1}, std::pair{"beta2", beta2}}) {
    if (!(beta >= 0.0 && beta < 1.0)) {
      fail(op, std::string(name) + " must be in [0, 1), got " + std::to_string(beta));
    }
  }
  const auto t = static_cast<double>(step);
  const math::AdamWHyper<double> hyper{1.0 - lr * weight_decay,
                                       beta1,
                                       1.0 - beta1,
                                       beta2,
                                       1.0 - beta2,
                                       std::sqrt(1.0 - std::pow(beta2, t)),
                                       lr / (1.0 - std::pow(beta1, t)),
                                       eps};
  if (!param.empty()) be.adamw_update(param, grad, exp_avg, exp_avg_sq, hyper);
}

void sum_squares(const Buffer& x, Buffer& out) {
  Backend& be = same_place("sum_squares", {{"x", x}, {"out", out}});
  expect_numel("sum_squares", {"out", out}, 1, "a scalar");
  be.sum_squares(x, out);
}

}  // namespace mpitron::kernels
