#include "kernels/checks.h"

#include <stdexcept>

namespace mpitron::kernels::checks {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string("kernels::") + op + ": " + what);
}

Backend& same_place_any_dtype(const char* op, std::initializer_list<Arg> args) {
  const Arg& first = *args.begin();
  for (const Arg& arg : args) {
    if (arg.buffer.device() != first.buffer.device() ||
        arg.buffer.dtype() != first.buffer.dtype()) {
      fail(op, std::string(first.name) + " is " + to_string(first.buffer.device()) + " " +
                   to_string(first.buffer.dtype()) + " but " + arg.name + " is " +
                   to_string(arg.buffer.device()) + " " + to_string(arg.buffer.dtype()));
    }
  }
  return backend(first.buffer.device());
}

Backend& same_place_any(const char* op, std::initializer_list<Arg> args) {
  Backend& be = same_place_any_dtype(op, args);
  expect_not_bf16(op, *args.begin());
  return be;
}

void expect_not_bf16(const char* op, const Arg& arg) {
  if (arg.buffer.dtype() == DType::bf16) {
    fail(op, std::string(arg.name) +
                 " is bfloat16; this op takes float32, float64, int32 or int64 buffers "
                 "(convert bfloat16 to float32 with kernels::convert first)");
  }
}

Backend& same_place(const char* op, std::initializer_list<Arg> args) {
  Backend& be = same_place_any(op, args);
  const Arg& first = *args.begin();
  if (!is_floating(first.buffer.dtype())) {
    fail(op, std::string(first.name) + " is " + to_string(first.buffer.dtype()) +
                 "; this op needs float32 or float64 buffers");
  }
  return be;
}

Backend& same_place_kept(const char* op, std::initializer_list<Arg> kept,
                         std::initializer_list<Arg> args) {
  Backend& be = same_place(op, args);
  const Arg& first = *args.begin();
  const Arg& first_kept = *kept.begin();
  if (first_kept.buffer.dtype() != DType::bf16 || first.buffer.dtype() != DType::f32) {
    for (const Arg& arg : kept)
      same_place(op, {arg, first});
    return be;
  }
  same_place_any_dtype(op, kept);
  if (first_kept.buffer.device() != first.buffer.device()) {
    fail(op, std::string(first_kept.name) + " is on " + to_string(first_kept.buffer.device()) +
                 " but " + first.name + " is on " + to_string(first.buffer.device()));
  }
  return be;
}

void expect_numel(const char* op, const Arg& arg, std::size_t expected, const char* what) {
  if (arg.buffer.numel() != expected) {
    fail(op, std::string(arg.name) + " has " + std::to_string(arg.buffer.numel()) +
                 " elements, expected " + std::to_string(expected) + " (" + what + ")");
  }
}

void expect_at_least(const char* op, const Arg& arg, std::size_t needed, const char* what) {
  if (arg.buffer.numel() < needed) {
    fail(op, std::string(arg.name) + " has " + std::to_string(arg.buffer.numel()) +
                 " elements, needs at least " + std::to_string(needed) + " (" + what + ")");
  }
}

void expect_rows_of(const char* op, const Arg& x, std::size_t cols) {
  if (x.buffer.numel() == 0) return;
  if (cols == 0 || x.buffer.numel() % cols != 0) {
    fail(op, std::string(x.name) + " has " + std::to_string(x.buffer.numel()) +
                 " elements, not a whole number of rows of cols = " + std::to_string(cols));
  }
}

void expect_distinct(const char* op, const Arg& out, const Arg& in) {
  if (&out.buffer == &in.buffer) fail(op, std::string(out.name) + " may not alias " + in.name);
}

void expect_indices(const char* op, const Arg& indices, Device device, std::size_t n) {
  const DType dtype = indices.buffer.dtype();
  if (indices.buffer.device() != device || (dtype != DType::i32 && dtype != DType::i64)) {
    fail(op, std::string(indices.name) + " is " + to_string(indices.buffer.device()) + " " +
                 to_string(indices.buffer.dtype()) + ", expected int32 or int64 on " +
                 to_string(device));
  }
  expect_numel(op, indices, n, "one per row");
}

}  // namespace mpitron::kernels::checks
