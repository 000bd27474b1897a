// The public ops: validate the arguments, then hand them to the device's backend.
#include "kernels/ops.h"

#include <stdexcept>
#include <string>

#include "kernels/backend.h"
#include "kernels/checks.h"
#include "kernels/fault_injection.h"

namespace mpitron::kernels {
using namespace checks;

void fill(Buffer& out, double value) {
  expect_not_bf16("fill", {"out", out});
  if (!out.empty()) backend(out.device()).fill(out, value);
}

void broadcast_scalar(const Buffer& s, double alpha, Buffer& out) {
  Backend& be = same_place("broadcast_scalar", {{"s", s}, {"out", out}});
  expect_numel("broadcast_scalar", {"s", s}, 1, "a scalar");
  if (!out.empty()) be.broadcast_scalar(s, alpha, out);
}

#define MPITRON_BINARY_OP(op)                                          \
  void op(const Buffer& a, const Buffer& b, Buffer& out) {             \
    Backend& be = same_place(#op, {{"a", a}, {"b", b}, {"out", out}}); \
    expect_numel(#op, {"b", b}, a.numel(), "numel of a");              \
    expect_numel(#op, {"out", out}, a.numel(), "numel of a");          \
    if (!out.empty()) be.op(a, b, out);                                \
  }
MPITRON_BINARY_OP(add)
MPITRON_BINARY_OP(sub)
MPITRON_BINARY_OP(mul)
#undef MPITRON_BINARY_OP

void scale(const Buffer& x, double alpha, Buffer& out) {
  Backend& be = same_place("scale", {{"x", x}, {"out", out}});
  expect_numel("scale", {"out", out}, x.numel(), "numel of x");
  if (!out.empty()) be.scale(x, alpha, out);
}

void axpy(double alpha, const Buffer& x, Buffer& y) {
  Backend& be = same_place("axpy", {{"x", x}, {"y", y}});
  expect_numel("axpy", {"y", y}, x.numel(), "numel of x");
  if (!y.empty()) be.axpy(alpha, x, y);
}

void bias_add(const Buffer& x, const Buffer& bias, std::size_t cols, Buffer& out) {
  Backend& be = same_place("bias_add", {{"x", x}, {"bias", bias}, {"out", out}});
  expect_rows_of("bias_add", {"x", x}, cols);
  expect_numel("bias_add", {"bias", bias}, cols, "cols");
  expect_numel("bias_add", {"out", out}, x.numel(), "numel of x");
  if (!out.empty()) be.bias_add(x, bias, cols, out);
}

void sum_rows(const Buffer& x, std::size_t cols, Buffer& out) {
  Backend& be = same_place("sum_rows", {{"x", x}, {"out", out}});
  expect_rows_of("sum_rows", {"x", x}, cols);
  expect_numel("sum_rows", {"out", out}, cols, "cols");
  if (!out.empty()) be.sum_rows(x, cols, out);
}

void sum(const Buffer& x, Buffer& out) {
  Backend& be = same_place("sum", {{"x", x}, {"out", out}});
  expect_numel("sum", {"out", out}, 1, "a scalar");
  be.sum(x, out);
}

void gelu_forward(const Buffer& x, Buffer& y, GeluForm form) {
  Backend& be = same_place("gelu_forward", {{"x", x}, {"y", y}});
  expect_numel("gelu_forward", {"y", y}, x.numel(), "numel of x");
  if (!y.empty()) be.gelu_forward(x, y, form);
}

void gelu_backward(const Buffer& x, const Buffer& dy, Buffer& dx, GeluForm form) {
  Backend& be = same_place("gelu_backward", {{"x", x}, {"dy", dy}, {"dx", dx}});
  expect_numel("gelu_backward", {"dy", dy}, x.numel(), "numel of x");
  expect_numel("gelu_backward", {"dx", dx}, x.numel(), "numel of x");
  if (!dx.empty()) be.gelu_backward(x, dy, dx, form);
}

void gelu_forward_backward(const Buffer& x, const Buffer& dy, Buffer& y, Buffer& dx,
                           GeluForm form) {
  Backend& be = same_place("gelu_forward_backward", {{"x", x}, {"dy", dy}, {"y", y}, {"dx", dx}});
  expect_numel("gelu_forward_backward", {"dy", dy}, x.numel(), "numel of x");
  expect_numel("gelu_forward_backward", {"y", y}, x.numel(), "numel of x");
  expect_numel("gelu_forward_backward", {"dx", dx}, x.numel(), "numel of x");
  if (!dx.empty()) be.gelu_forward_backward(x, dy, y, dx, form);
}

void bias_gelu(Buffer& y, const Buffer& bias, std::size_t cols, Buffer& g, GeluForm form) {
  Backend& be = same_place("bias_gelu", {{"y", y}, {"bias", bias}, {"g", g}});
  expect_rows_of("bias_gelu", {"y", y}, cols);
  expect_numel("bias_gelu", {"bias", bias}, cols, "cols");
  expect_numel("bias_gelu", {"g", g}, y.numel(), "numel of y");
  if (!g.empty()) be.bias_gelu(y, bias, cols, g, form);
}

namespace {

// bias_gelu_bf16's and its backward's checks: pre and g bfloat16 [rows, cols], bias float32
// [cols], dg (when given) float32 of pre's numel, all on one device.
Backend& check_bias_gelu_bf16(const char* op, const Buffer& pre, const Buffer& bias,
                              std::size_t cols, const Buffer& g, const Buffer* dg) {
  const auto expect = [&](const char* name, const Buffer& b, DType dtype) {
    if (b.dtype() != dtype) {
      fail(op,
           std::string(name) + " is " + to_string(b.dtype()) + ", expected " + to_string(dtype));
    }
    if (b.device() != pre.device()) {
      fail(op, std::string(name) + " is on " + to_string(b.device()) + " but pre on " +
                   to_string(pre.device()));
    }
  };
  expect("pre", pre, DType::bf16);
  expect("g", g, DType::bf16);
  expect("bias", bias, DType::f32);
  if (dg != nullptr) expect("dg", *dg, DType::f32);
  Backend& be = same_place_any_dtype(op, {{"pre", pre}, {"g", g}});
  expect_rows_of(op, {"pre", pre}, cols);
  expect_numel(op, {"bias", bias}, cols, "cols");
  expect_numel(op, {"g", g}, pre.numel(), "numel of pre");
  if (dg != nullptr) expect_numel(op, {"dg", *dg}, pre.numel(), "numel of pre");
  return be;
}

}  // namespace

void bias_gelu_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& g,
                    GeluForm form) {
  Backend& be = check_bias_gelu_bf16("bias_gelu_bf16", pre, bias, cols, g, nullptr);
  if (!g.empty()) be.bias_gelu_bf16(pre, bias, cols, g, form);
}

void bias_gelu_backward_bf16(const Buffer& pre, const Buffer& bias, std::size_t cols, Buffer& dg,
                             Buffer& g, GeluForm form) {
  Backend& be = check_bias_gelu_bf16("bias_gelu_backward_bf16", pre, bias, cols, g, &dg);
  if (!g.empty()) be.bias_gelu_backward_bf16(pre, bias, cols, dg, g, form);
}

void softmax_forward(const Buffer& x, std::size_t cols, Buffer& y, bool causal, double scale) {
  Backend& be = same_place("softmax_forward", {{"x", x}, {"y", y}});
  expect_rows_of("softmax_forward", {"x", x}, cols);
  expect_numel("softmax_forward", {"y", y}, x.numel(), "numel of x");
  if (causal && !x.empty() && (x.numel() / cols) % cols != 0) {
    fail("softmax_forward", "causal softmax needs square [cols, cols] score matrices, but x has " +
                                std::to_string(x.numel() / cols) +
                                " rows of cols = " + std::to_string(cols));
  }
  if (!y.empty()) be.softmax_forward(x, cols, y, causal, scale);
}

void softmax_backward(const Buffer& y, const Buffer& dy, std::size_t cols, Buffer& dx,
                      double scale) {
  Backend& be = same_place("softmax_backward", {{"y", y}, {"dy", dy}, {"dx", dx}});
  expect_rows_of("softmax_backward", {"y", y}, cols);
  expect_numel("softmax_backward", {"dy", dy}, y.numel(), "numel of y");
  expect_numel("softmax_backward", {"dx", dx}, y.numel(), "numel of y");
  if (!dx.empty()) be.softmax_backward(y, dy, cols, dx, scale);
}

namespace {

// The checks shared by attention_forward and attention_backward: q's numel is batch_heads seq
// head_dim, k, v and every [batch_heads, seq, head_dim] buffer match it, and lse holds
// batch_heads seq elements. Returns whether there is any work.
bool check_attention(const char* op, std::size_t seq, std::size_t head_dim, const Buffer& q,
                     std::initializer_list<Arg> same_as_q, const Buffer& lse) {
  if (seq == 0 || head_dim == 0) {
    fail(op, "seq and head_dim must be >= 1, got seq " + std::to_string(seq) + " and head_dim " +
                 std::to_string(head_dim));
  }
  expect_rows_of(op, {"q", q}, seq * head_dim);
  for (const Arg& arg : same_as_q)
    expect_numel(op, arg, q.numel(), "numel of q");
  expect_numel(op, {"lse", lse}, q.numel() / head_dim, "numel of q / head_dim");
  return !q.empty();
}

}  // namespace

void attention_forward(const Buffer& q, const Buffer& k, const Buffer& v, std::size_t seq,
                       std::size_t head_dim, bool causal, double scale, Buffer& o, Buffer& lse) {
  constexpr const char* op = "attention_forward";
  Backend& be = same_place_kept(op, {{"q", q}, {"k", k}, {"v", v}}, {{"o", o}, {"lse", lse}});
  for (const Arg& in : {Arg{"q", q}, Arg{"k", k}, Arg{"v", v}})
    expect_distinct(op, {"o", o}, in);
  if (check_attention(op, seq, head_dim, q, {{"k", k}, {"v", v}, {"o", o}}, lse)) {
    be.attention_forward(q, k, v, seq, head_dim, causal, scale, o, lse);
  }
}

void attention_merge(Buffer& o, Buffer& lse, const Buffer& block_o, const Buffer& block_lse,
                     std::size_t head_dim) {
  constexpr const char* op = "attention_merge";
  Backend& be =
      same_place(op, {{"o", o}, {"lse", lse}, {"block_o", block_o}, {"block_lse", block_lse}});
  if (head_dim == 0) fail(op, "head_dim must be >= 1");
  expect_rows_of(op, {"o", o}, head_dim);
  expect_numel(op, {"block_o", block_o}, o.numel(), "numel of o");
  expect_numel(op, {"lse", lse}, o.numel() / head_dim, "numel of o / head_dim");
  expect_numel(op, {"block_lse", block_lse}, o.numel() / head_dim, "numel of o / head_dim");
  if (!o.empty()) be.attention_merge(o, lse, block_o, block_lse, head_dim);
}

void attention_backward(const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& o,
                        const Buffer& lse, const Buffer& dout, std::size_t seq,
                        std::size_t head_dim, bool causal, double scale, Buffer& dq, Buffer& dk,
                        Buffer& dv) {
  constexpr const char* op = "attention_backward";
  Backend& be = same_place_kept(op, {{"q", q}, {"k", k}, {"v", v}, {"o", o}},
                                {{"lse", lse}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}});
  for (const Arg& out : {Arg{"dq", dq}, Arg{"dk", dk}, Arg{"dv", dv}}) {
    for (const Arg& in : {Arg{"q", q}, Arg{"k", k}, Arg{"v", v}, Arg{"o", o}, Arg{"dout", dout}})
      expect_distinct(op, out, in);
  }
  if (check_attention(
          op, seq, head_dim, q,
          {{"k", k}, {"v", v}, {"o", o}, {"dout", dout}, {"dq", dq}, {"dk", dk}, {"dv", dv}},
          lse)) {
    be.attention_backward(q, k, v, o, lse, dout, seq, head_dim, causal, scale, dq, dk, dv);
  }
}

void mse_forward(const Buffer& pred, const Buffer& target, Buffer& loss) {
  Backend& be = same_place("mse_forward", {{"pred", pred}, {"target", target}, {"loss", loss}});
  expect_numel("mse_forward", {"target", target}, pred.numel(), "numel of pred");
  expect_numel("mse_forward", {"loss", loss}, 1, "a scalar");
  be.mse_forward(pred, target, loss);
}

void mse_backward(const Buffer& pred, const Buffer& target, const Buffer& dloss, Buffer& dpred) {
  Backend& be = same_place(
      "mse_backward", {{"pred", pred}, {"target", target}, {"dloss", dloss}, {"dpred", dpred}});
  expect_numel("mse_backward", {"target", target}, pred.numel(), "numel of pred");
  expect_numel("mse_backward", {"dloss", dloss}, 1, "a scalar");
  expect_numel("mse_backward", {"dpred", dpred}, pred.numel(), "numel of pred");
  if (!dpred.empty()) be.mse_backward(pred, target, dloss, dpred);
}

namespace {

GemmOperands gemm_operand_precision = GemmOperands::float32;

// x itself when it is bfloat16, else x rounded into `copy`.
const Buffer& bf16_gemm_operand(const Buffer& x, Buffer& copy) {
  if (x.dtype() == DType::bf16) return x;
  copy = Buffer(x.numel(), DType::bf16, x.device());
  convert(x, copy);
  return copy;
}

// gemm's bfloat16 operands: A and B (each rounded into a bfloat16 copy unless it is bfloat16
// already) multiplied into the float32 C.
void gemm_in_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  double alpha, const Buffer& a, const Buffer& b, double beta, Buffer& c) {
  expect_distinct("gemm", {"c", c}, {"a", a});
  expect_distinct("gemm", {"c", c}, {"b", b});
  Buffer a_copy, b_copy;
  gemm_bf16(trans_a, trans_b, m, n, k, alpha, bf16_gemm_operand(a, a_copy),
            bf16_gemm_operand(b, b_copy), beta, c);
  if (beta != 0.0 && fault_active(Fault::bf16_main_grad_in_bf16)) {
    Buffer c16(c.numel(), DType::bf16, c.device());
    convert(c, c16);
    convert(c16, c);
  }
}

void gemm_checked(const char* op, bool trans_a, bool trans_b, std::size_t batch, std::size_t m,
                  std::size_t n, std::size_t k, double alpha, const Buffer& a, std::size_t stride_a,
                  const Buffer& b, std::size_t stride_b, double beta, Buffer& c,
                  std::size_t stride_c) {
  Backend& be = same_place(op, {{"a", a}, {"b", b}, {"c", c}});
  expect_distinct(op, {"c", c}, {"a", a});
  expect_distinct(op, {"c", c}, {"b", b});
  if (batch == 0 || m * n == 0) return;
  if (batch > 1 && stride_c < m * n) fail(op, "stride_c < m * n makes the outputs overlap");
  expect_at_least(op, {"a", a}, (batch - 1) * stride_a + m * k, "(batch-1)*stride_a + m*k");
  expect_at_least(op, {"b", b}, (batch - 1) * stride_b + k * n, "(batch-1)*stride_b + k*n");
  expect_at_least(op, {"c", c}, (batch - 1) * stride_c + m * n, "(batch-1)*stride_c + m*n");
  be.gemm_batched(trans_a, trans_b, batch, m, n, k, alpha, a, stride_a, b, stride_b, beta, c,
                  stride_c);
}

}  // namespace

void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, double alpha,
          const Buffer& a, const Buffer& b, double beta, Buffer& c) {
  expect_numel("gemm", {"a", a}, m * k, "m * k");
  expect_numel("gemm", {"b", b}, k * n, "k * n");
  expect_numel("gemm", {"c", c}, m * n, "m * n");
  const auto f32_or_bf16 = [](const Buffer& x) {
    return x.dtype() == DType::f32 || x.dtype() == DType::bf16;
  };
  const bool bf16_operand = a.dtype() == DType::bf16 || b.dtype() == DType::bf16;
  if (c.dtype() == DType::f32 && f32_or_bf16(a) && f32_or_bf16(b) &&
      (bf16_operand || gemm_operand_precision == GemmOperands::bfloat16)) {
    gemm_in_bf16(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
    return;
  }
  gemm_checked("gemm", trans_a, trans_b, 1, m, n, k, alpha, a, 0, b, 0, beta, c, 0);
}

void set_gemm_operands(GemmOperands operands) {
  gemm_operand_precision = operands;
}

GemmOperands gemm_operands() {
  return gemm_operand_precision;
}

void gemm_batched(bool trans_a, bool trans_b, std::size_t batch, std::size_t m, std::size_t n,
                  std::size_t k, double alpha, const Buffer& a, std::size_t stride_a,
                  const Buffer& b, std::size_t stride_b, double beta, Buffer& c,
                  std::size_t stride_c) {
  gemm_checked("gemm_batched", trans_a, trans_b, batch, m, n, k, alpha, a, stride_a, b, stride_b,
               beta, c, stride_c);
}

void gemm_bf16(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
               double alpha, const Buffer& a, const Buffer& b, double beta, Buffer& c) {
  for (const Arg& arg : {Arg{"a", a}, Arg{"b", b}}) {
    if (arg.buffer.dtype() != DType::bf16) {
      fail("gemm_bf16",
           std::string(arg.name) + " is " + to_string(arg.buffer.dtype()) + ", expected bfloat16");
    }
  }
  if (c.dtype() != DType::f32 && c.dtype() != DType::bf16) {
    fail("gemm_bf16", "c is " + to_string(c.dtype()) + ", expected float32 or bfloat16");
  }
  if (a.device() != c.device() || b.device() != c.device()) {
    fail("gemm_bf16", "a is on " + to_string(a.device()) + ", b on " + to_string(b.device()) +
                          " and c on " + to_string(c.device()));
  }
  expect_distinct("gemm_bf16", {"c", c}, {"a", a});
  expect_distinct("gemm_bf16", {"c", c}, {"b", b});
  expect_numel("gemm_bf16", {"a", a}, m * k, "m * k");
  expect_numel("gemm_bf16", {"b", b}, k * n, "k * n");
  expect_numel("gemm_bf16", {"c", c}, m * n, "m * n");
  if (m * n != 0) backend(c.device()).gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

void convert(const Buffer& src, Buffer& dst) {
  const DType from = src.dtype(), to = dst.dtype();
  if (!((from == DType::f32 && to == DType::bf16) || (from == DType::bf16 && to == DType::f32))) {
    fail("convert", "src is " + to_string(from) + " and dst " + to_string(to) +
                        "; convert goes from float32 to bfloat16 or from bfloat16 to float32");
  }
  if (src.device() != dst.device()) {
    fail("convert",
         "src is on " + to_string(src.device()) + " but dst on " + to_string(dst.device()));
  }
  expect_numel("convert", {"dst", dst}, src.numel(), "numel of src");
  if (!dst.empty()) backend(dst.device()).convert(src, dst);
}

void round_to_bf16(const Buffer& src, Buffer& dst) {
  if (src.dtype() != DType::f32 || dst.dtype() != DType::f32) {
    fail("round_to_bf16", "src is " + to_string(src.dtype()) + " and dst " +
                              to_string(dst.dtype()) + ", not float32");
  }
  Backend& be = same_place_any("round_to_bf16", {{"src", src}, {"dst", dst}});
  expect_numel("round_to_bf16", {"dst", dst}, src.numel(), "numel of src");
  if (!dst.empty()) be.round_through_bf16(src, dst);
}

void transpose(const Buffer& x, std::size_t outer, std::size_t d1, std::size_t mid, std::size_t d2,
               std::size_t inner, Buffer& y) {
  Backend& be = same_place_any("transpose", {{"x", x}, {"y", y}});
  expect_distinct("transpose", {"y", y}, {"x", x});
  const std::size_t numel = outer * d1 * mid * d2 * inner;
  expect_numel("transpose", {"x", x}, numel, "outer * d1 * mid * d2 * inner");
  expect_numel("transpose", {"y", y}, numel, "outer * d1 * mid * d2 * inner");
  if (numel > 0) be.transpose(x, outer, d1, mid, d2, inner, y);
}

void copy_rows(const Buffer& src, std::size_t src_offset, std::size_t src_stride, Buffer& dst,
               std::size_t dst_offset, std::size_t dst_stride, std::size_t rows,
               std::size_t row_len) {
  Backend& be = same_place_any_dtype("copy_rows", {{"src", src}, {"dst", dst}});
  expect_distinct("copy_rows", {"dst", dst}, {"src", src});
  if (rows == 0 || row_len == 0) return;
  auto in_bounds = [&](const char* name, const Buffer& buffer, std::size_t offset,
                       std::size_t stride) {
    const std::size_t end = offset + (rows - 1) * stride + row_len;
    if (end > buffer.numel()) {
      throw std::out_of_range(
          "kernels::copy_rows: " + std::to_string(rows) + " rows of " + std::to_string(row_len) +
          " at offset " + std::to_string(offset) + ", stride " + std::to_string(stride) + " need " +
          std::to_string(end) + " elements but " + name + " has " + std::to_string(buffer.numel()));
    }
  };
  in_bounds("src", src, src_offset, src_stride);
  in_bounds("dst", dst, dst_offset, dst_stride);
  be.copy_rows(src, src_offset, src_stride, dst, dst_offset, dst_stride, rows, row_len);
}

}  // namespace mpitron::kernels
