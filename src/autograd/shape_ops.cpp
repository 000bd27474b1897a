// Shape ops: reshape (a view), transpose of two dims, narrow, split and concat.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/op_util.h"
#include "autograd/ops.h"

namespace mpitron::autograd {

using detail::empty_like;
using detail::extent_product;

namespace {

Shape resolve_shape(const Tensor& x, Shape shape) {
  std::int64_t known = 1;
  int inferred = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && inferred < 0) {
      inferred = static_cast<int>(i);
    } else {
      known *= shape[i];
    }
  }
  if (inferred >= 0 && known > 0 && x.numel() % known == 0) {
    shape[static_cast<std::size_t>(inferred)] = x.numel() / known;
  }
  // Extents are checked before numel_of, whose own error for a negative extent omits "reshape".
  if (std::any_of(shape.begin(), shape.end(), [](std::int64_t e) { return e < 0; }) ||
      numel_of(shape) != x.numel()) {
    throw std::invalid_argument(
        fmt::format("reshape: cannot view {} as {}", to_string(x.shape()), to_string(shape)));
  }
  if (shape.empty() && x.numel() != 1) {
    throw std::invalid_argument("reshape: cannot view " + to_string(x.shape()) + " as a scalar");
  }
  return shape;
}

// x viewed as [outer, extent, inner] around dim `dim`.
struct DimView {
  std::size_t outer, extent, inner;
};

DimView view_around(const Shape& shape, int dim) {
  const int n = static_cast<int>(shape.size());
  return {extent_product(shape, 0, dim),
          static_cast<std::size_t>(shape[static_cast<std::size_t>(dim)]),
          extent_product(shape, dim + 1, n)};
}

// Copies x's slice [start, start+length) of the viewed dim into y (or back, when `scatter`).
void copy_slice(const kernels::Buffer& from, kernels::Buffer& to, const DimView& v,
                std::size_t start, std::size_t length, bool scatter) {
  const std::size_t block = length * v.inner;
  const std::size_t big_stride = v.extent * v.inner;
  if (scatter) {
    kernels::copy_rows(from, 0, block, to, start * v.inner, big_stride, v.outer, block);
  } else {
    kernels::copy_rows(from, start * v.inner, big_stride, to, 0, block, v.outer, block);
  }
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = x.detach();
  y.impl()->shape = resolve_shape(x, shape);
  const Shape input_shape = x.shape();
  return detail::record("reshape", y, {x}, [input_shape](const Tensor& dy) {
    Tensor dx = dy.detach();
    dx.impl()->shape = input_shape;
    return std::vector<Tensor>{dx};
  });
}

Tensor transpose(const Tensor& x, int d0, int d1) {
  int a = detail::normalize_dim("transpose", d0, x.ndim());
  int b = detail::normalize_dim("transpose", d1, x.ndim());
  if (a == b) return reshape(x, x.shape());  // a dim swapped with itself: the same tensor
  if (a > b) std::swap(a, b);
  const Shape& s = x.shape();
  const std::size_t outer = extent_product(s, 0, a), n1 = extent_product(s, a, a + 1),
                    mid = extent_product(s, a + 1, b), n2 = extent_product(s, b, b + 1),
                    inner = extent_product(s, b + 1, x.ndim());
  Shape y_shape = s;
  std::swap(y_shape[static_cast<std::size_t>(a)], y_shape[static_cast<std::size_t>(b)]);
  Tensor y = empty_like(x, y_shape);
  kernels::transpose(x.buffer(), outer, n1, mid, n2, inner, y.buffer());
  return detail::record("transpose", y, {x}, [s, outer, n1, mid, n2, inner](const Tensor& dy) {
    Tensor dx = empty_like(dy, s);
    kernels::transpose(dy.buffer(), outer, n2, mid, n1, inner, dx.buffer());
    return std::vector<Tensor>{dx};
  });
}

Tensor narrow(const Tensor& x, int dim, std::int64_t start, std::int64_t length) {
  const int d = detail::normalize_dim("narrow", dim, x.ndim());
  if (start < 0 || length < 0 || start + length > x.size(d)) {
    throw std::out_of_range(fmt::format("narrow: [{}, {}) is outside dim {} of {}", start,
                                        start + length, d, to_string(x.shape())));
  }
  const DimView v = view_around(x.shape(), d);
  Shape y_shape = x.shape();
  y_shape[static_cast<std::size_t>(d)] = length;
  Tensor y = empty_like(x, y_shape);
  const auto first = static_cast<std::size_t>(start), count = static_cast<std::size_t>(length);
  copy_slice(x.buffer(), y.buffer(), v, first, count, false);
  const Shape x_shape = x.shape();
  return detail::record("narrow", y, {x}, [x_shape, v, first, count](const Tensor& dy) {
    Tensor dx = Tensor::zeros(x_shape, dy.dtype(), dy.device());
    copy_slice(dy.buffer(), dx.buffer(), v, first, count, true);
    return std::vector<Tensor>{dx};
  });
}

std::vector<Tensor> split(const Tensor& x, int chunks, int dim) {
  const int d = detail::normalize_dim("split", dim, x.ndim());
  if (chunks < 1 || x.size(d) % chunks != 0) {
    throw std::invalid_argument(fmt::format("split: dim {} of {} is not divisible into {} chunks",
                                            d, to_string(x.shape()), chunks));
  }
  const std::int64_t length = x.size(d) / chunks;
  std::vector<Tensor> parts;
  for (int i = 0; i < chunks; ++i)
    parts.push_back(narrow(x, d, i * length, length));
  return parts;
}

Tensor concat(const std::vector<Tensor>& parts, int dim) {
  if (parts.empty()) throw std::invalid_argument("concat: no tensors");
  detail::check_compatible("concat", parts);
  const int d = detail::normalize_dim("concat", dim, parts[0].ndim());
  Shape y_shape = parts[0].shape();
  y_shape[static_cast<std::size_t>(d)] = 0;
  for (const Tensor& p : parts) {
    Shape expected = y_shape;
    expected[static_cast<std::size_t>(d)] = p.ndim() == parts[0].ndim() ? p.size(d) : -1;
    if (p.shape() != expected) {
      throw std::invalid_argument(fmt::format("concat: shape {} does not fit {} along dim {}",
                                              to_string(p.shape()), to_string(parts[0].shape()),
                                              d));
    }
    y_shape[static_cast<std::size_t>(d)] += p.size(d);
  }
  Tensor y = empty_like(parts[0], y_shape);
  const DimView v = view_around(y_shape, d);
  std::vector<std::pair<std::size_t, std::size_t>> slices;  // (start, length) along d
  std::size_t start = 0;
  for (const Tensor& p : parts) {
    const auto length = static_cast<std::size_t>(p.size(d));
    copy_slice(p.buffer(), y.buffer(), v, start, length, true);
    slices.emplace_back(start, length);
    start += length;
  }
  return detail::record("concat", y, parts, [v, slices, d](const Tensor& dy) {
    std::vector<Tensor> grads;
    for (const auto& [first, length] : slices) {
      Shape shape = dy.shape();
      shape[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(length);
      Tensor g = empty_like(dy, shape);
      copy_slice(dy.buffer(), g.buffer(), v, first, length, false);
      grads.push_back(g);
    }
    return grads;
  });
}

}  // namespace mpitron::autograd
