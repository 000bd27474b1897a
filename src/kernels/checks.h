// Internal: the argument checks of the public ops (ops.cpp, ops_model.cpp), so every op reports
// a mismatch the same way: std::invalid_argument "kernels::<op>: <what>".
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>

#include "kernels/backend.h"

namespace mpitron::kernels::checks {

/// A named argument of an op.
struct Arg {
  const char* name;
  const Buffer& buffer;
};

/// Throws std::invalid_argument "kernels::<op>: <what>".
[[noreturn]] void fail(const char* op, const std::string& what);

/// All buffers on one device with one dtype, any dtype (bfloat16 included: copy_rows moves its
/// 16-bit elements); returns that device's backend.
Backend& same_place_any_dtype(const char* op, std::initializer_list<Arg> args);

/// As same_place_any_dtype, of any dtype but bfloat16 (the other ops that only move elements).
Backend& same_place_any(const char* op, std::initializer_list<Arg> args);

/// `arg` is not a bfloat16 buffer (the message names bfloat16 and kernels::convert).
void expect_not_bf16(const char* op, const Arg& arg);

/// As same_place_any, and the dtype is float32 or float64 (every arithmetic op).
Backend& same_place(const char* op, std::initializer_list<Arg> args);

/// A backward op's arguments: `args` as same_place; `kept`, the activations its forward kept, the
/// same, or all bfloat16 on their device beside float32 `args` (what train --bf16 keeps, which
/// the kernel widens element by element); also a forward op writing such a kept copy
/// (LayerNorm's xhat). Returns the backend of `args`.
Backend& same_place_kept(const char* op, std::initializer_list<Arg> kept,
                         std::initializer_list<Arg> args);

/// An index argument: on `device`, int32 or int64, `n` elements.
void expect_indices(const char* op, const Arg& indices, Device device, std::size_t n);

void expect_numel(const char* op, const Arg& arg, std::size_t expected, const char* what);

void expect_at_least(const char* op, const Arg& arg, std::size_t needed, const char* what);

/// x viewed as [rows, cols]: numel must be a multiple of cols (> 0 unless x is empty).
void expect_rows_of(const char* op, const Arg& x, std::size_t cols);

void expect_distinct(const char* op, const Arg& out, const Arg& in);

}  // namespace mpitron::kernels::checks
