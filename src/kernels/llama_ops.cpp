// The public ops of the Llama family (llama_ops.h): validate, then hand to the backend.
#include "kernels/llama_ops.h"

#include <cmath>
#include <sstream>
#include <string>

#include "kernels/backend.h"
#include "kernels/checks.h"

namespace mpitron::kernels {
using namespace checks;

void rms_norm_forward(const Buffer& x, const Buffer& weight, std::size_t cols, double eps,
                      Buffer& y, Buffer& rstd) {
  constexpr const char* op = "rms_norm_forward";
  Backend& be = same_place(op, {{"x", x}, {"weight", weight}, {"y", y}, {"rstd", rstd}});
  expect_rows_of(op, {"x", x}, cols);
  expect_numel(op, {"weight", weight}, cols, "cols");
  expect_numel(op, {"y", y}, x.numel(), "numel of x");
  const std::size_t rows = cols == 0 ? 0 : x.numel() / cols;
  expect_numel(op, {"rstd", rstd}, rows, "rows of x");
  if (!(eps >= 0.0)) fail(op, "eps must be >= 0, got " + std::to_string(eps));
  if (rows > 0) be.rms_norm_forward(x, weight, cols, eps, y, rstd);
}

void rms_norm_backward(const Buffer& x, const Buffer& weight, const Buffer& rstd, const Buffer& dy,
                       std::size_t cols, Buffer& dx, Buffer& dweight) {
  constexpr const char* op = "rms_norm_backward";
  Backend& be = same_place_kept(
      op, {{"x", x}},
      {{"dy", dy}, {"weight", weight}, {"rstd", rstd}, {"dx", dx}, {"dweight", dweight}});
  expect_rows_of(op, {"x", x}, cols);
  expect_numel(op, {"weight", weight}, cols, "cols");
  const std::size_t rows = cols == 0 ? 0 : x.numel() / cols;
  expect_numel(op, {"rstd", rstd}, rows, "rows of x");
  expect_numel(op, {"dy", dy}, x.numel(), "numel of x");
  expect_numel(op, {"dx", dx}, x.numel(), "numel of x");
  expect_numel(op, {"dweight", dweight}, cols, "cols");
  if (rows == 0) {
    fill(dweight, 0.0);
    return;
  }
  be.rms_norm_backward(x, weight, rstd, dy, cols, dx, dweight);
}

std::optional<std::string> rope_error(const RopeFrequencies& rope) {
  const auto text = [](const char* what, double value, const char* rule) {
    std::ostringstream out;
    out << what << " " << value << " " << rule;
    return out.str();
  };
  if (!(rope.theta > 0.0) || !std::isfinite(rope.theta)) {
    return text("theta", rope.theta, "is not a finite number > 0");
  }
  const Llama3RopeScaling& s = rope.scaling;
  if (!s.active()) return std::nullopt;
  if (!(s.factor >= 1.0) || !std::isfinite(s.factor)) {
    return text("rope_scaling factor", s.factor, "is not a finite number >= 1");
  }
  if (!(s.low_freq_factor > 0.0) || !(s.low_freq_factor < s.high_freq_factor) ||
      !std::isfinite(s.high_freq_factor)) {
    return text("rope_scaling low_freq_factor", s.low_freq_factor,
                "is not in (0, high_freq_factor) with a finite high_freq_factor");
  }
  if (!(s.original_max_positions > 0.0) || !std::isfinite(s.original_max_positions)) {
    return text("rope_scaling original_max_position_embeddings", s.original_max_positions,
                "is not a finite number > 0");
  }
  return std::nullopt;
}

namespace {

// The checks of rotary_embedding and its backward; returns whether there is any work.
bool check_rotary(const char* op, const Arg& in, const Arg& out, std::size_t seq, std::size_t heads,
                  std::size_t head_dim, const RopeFrequencies& rope, std::int64_t position_offset) {
  if (seq == 0 || heads == 0 || head_dim == 0 || head_dim % 2 != 0) {
    fail(op, "seq, heads and head_dim must be >= 1 and head_dim even, got seq " +
                 std::to_string(seq) + ", heads " + std::to_string(heads) + ", head_dim " +
                 std::to_string(head_dim));
  }
  if (const auto error = rope_error(rope)) fail(op, *error);
  if (position_offset < 0) {
    fail(op, "position_offset must be >= 0, got " + std::to_string(position_offset));
  }
  expect_rows_of(op, in, seq * heads * head_dim);
  expect_numel(op, out, in.buffer.numel(), "numel of the input");
  return !in.buffer.empty();
}

}  // namespace

void rotary_embedding(const Buffer& x, std::size_t seq, std::size_t heads, std::size_t head_dim,
                      const RopeFrequencies& rope, std::int64_t position_offset, Buffer& y) {
  constexpr const char* op = "rotary_embedding";
  Backend& be = same_place(op, {{"x", x}, {"y", y}});
  if (check_rotary(op, {"x", x}, {"y", y}, seq, heads, head_dim, rope, position_offset)) {
    be.rotary_embedding(x, seq, heads, head_dim, rope, position_offset, false, y);
  }
}

void rotary_embedding_backward(const Buffer& dy, std::size_t seq, std::size_t heads,
                               std::size_t head_dim, const RopeFrequencies& rope,
                               std::int64_t position_offset, Buffer& dx) {
  constexpr const char* op = "rotary_embedding_backward";
  Backend& be = same_place(op, {{"dy", dy}, {"dx", dx}});
  if (check_rotary(op, {"dy", dy}, {"dx", dx}, seq, heads, head_dim, rope, position_offset)) {
    be.rotary_embedding(dy, seq, heads, head_dim, rope, position_offset, true, dx);
  }
}

void swiglu_forward(const Buffer& gate, const Buffer& up, Buffer& y) {
  constexpr const char* op = "swiglu_forward";
  Backend& be = same_place(op, {{"gate", gate}, {"up", up}, {"y", y}});
  expect_numel(op, {"up", up}, gate.numel(), "numel of gate");
  expect_numel(op, {"y", y}, gate.numel(), "numel of gate");
  if (!y.empty()) be.swiglu_forward(gate, up, y);
}

void swiglu_backward(const Buffer& gate, const Buffer& up, const Buffer& dy, Buffer& dgate,
                     Buffer& dup) {
  constexpr const char* op = "swiglu_backward";
  Backend& be = same_place_kept(op, {{"gate", gate}, {"up", up}},
                                {{"dy", dy}, {"dgate", dgate}, {"dup", dup}});
  expect_distinct(op, {"dup", dup}, {"dgate", dgate});
  for (const Arg& arg : {Arg{"up", up}, Arg{"dy", dy}, Arg{"dgate", dgate}, Arg{"dup", dup}})
    expect_numel(op, arg, gate.numel(), "numel of gate");
  if (!gate.empty()) be.swiglu_backward(gate, up, dy, dgate, dup);
}

}  // namespace mpitron::kernels
