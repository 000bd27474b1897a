#include "nn/layers/context_parallel_attention.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "comm/collectives.h"
#include "comm/point_to_point.h"
#include "kernels/ops.h"
#include "nn/fault_injection.h"

namespace mpitron::nn {

namespace {

// Transfer tags on the cp communicator: the forward's key/value shards, the backward's, and the
// key/value gradients travelling behind them.
constexpr int kForwardTag = 1, kBackwardTag = 2, kGradientTag = 3;

// The four [batch, heads, chunk, head_dim] parts of one rank's keys and values: k of its first
// chunk, k of its second, v of its first, v of its second.
constexpr std::int64_t kParts = 4;
using Parts = std::array<Tensor, kParts>;
constexpr int key_part(int half) {
  return half;
}
constexpr int value_part(int half) {
  return 2 + half;
}

// One query chunk against one key chunk.
struct Block {
  int query_half, key_half;
  bool causal;
};

// The blocks rank `rank`'s queries compute against the keys of rank `src` (the header's rule).
std::vector<Block> visible_blocks(int rank, int src) {
  if (src == rank) return {{0, 0, true}, {1, 0, false}, {1, 1, true}};
  if (src < rank) return {{0, 0, false}, {1, 0, false}};
  return {{1, 0, false}, {1, 1, false}};
}

std::array<Tensor, 2> halves(const Tensor& x) {
  const std::vector<Tensor> parts = autograd::split(x, 2, 2);
  return {parts[0], parts[1]};
}

// Parts stacked as one contiguous [n, batch, heads, chunk, head_dim] tensor, the unit of a
// transfer, and back.
Tensor pack(const std::vector<Tensor>& parts) {
  std::vector<Tensor> rows;
  for (const Tensor& part : parts) {
    autograd::Shape shape = part.shape();
    shape.insert(shape.begin(), 1);
    rows.push_back(autograd::reshape(part, shape));
  }
  return autograd::concat(rows, 0);
}
std::vector<Tensor> unpack(const Tensor& packed) {
  std::vector<Tensor> parts;
  const autograd::Shape shape(packed.shape().begin() + 1, packed.shape().end());
  for (const Tensor& row : autograd::split(packed, static_cast<int>(packed.size(0)), 0))
    parts.push_back(autograd::reshape(row, shape));
  return parts;
}
Parts parts_of(const std::vector<Tensor>& parts, std::size_t first) {
  return {parts[first], parts[first + 1], parts[first + 2], parts[first + 3]};
}
Tensor packed_parts(const Tensor& k, const Tensor& v) {
  const auto [k0, k1] = halves(k);
  const auto [v0, v1] = halves(v);
  return pack({k0, k1, v0, v1});
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A running result of one query chunk: output [batch, heads, chunk, head_dim] normalized over
// the keys merged so far and their log-sum-exp [batch, heads, chunk].
struct Partial {
  Tensor o, lse;
};

struct Shapes {
  autograd::Shape chunk;  // [batch, heads, chunk, head_dim]
  std::size_t chunk_len, head_dim;
};

// The state forward and backward share.
struct Setup {
  comm::Communicator cp;
  CpComm how;
  double scale;
  bool prefetch;
  Shapes shapes;
};

// The key/value shards of every cp rank in turn (`own` is this rank's, as it crosses the wire), as
// `visit(src, parts)` with the parts float32 or float64: around the ring (the
// next shard's transfer started before `visit` runs on the current one, unless !prefetch) or
// from one all-gather. `after_step(src)` runs after each shard's visit and its transfer (the
// ring's backward passes the key/value gradients there).
template <class Visit, class AfterStep>
void for_each_shard(const Setup& setup, const Tensor& own, int tag, Visit visit,
                    AfterStep after_step) {
  const comm::Communicator& cp = setup.cp;
  const int size = cp.size(), rank = cp.rank();
  if (setup.how == CpComm::all_gather && size > 1) {
    autograd::Shape shape = own.shape();
    shape[0] *= size;
    Tensor gathered = Tensor::empty(shape, own.dtype(), own.device());
    const auto start = std::chrono::steady_clock::now();
    comm::all_gather(cp, own.buffer(), gathered.buffer(), 1);
    cp_attention_times().wait_s += seconds_since(start);
    const std::vector<Tensor> parts = unpack(gathered);
    for (int src = 0; src < size; ++src) {
      visit(src, parts_of(parts, static_cast<std::size_t>(src) * kParts));
      after_step(src);
    }
    return;
  }
  Tensor current = own;
  const auto shape = own.shape();
  for (int step = 0; step < size; ++step) {
    const int src = (rank - step + size) % size;
    Tensor incoming;
    comm::SendRequest send;
    comm::RecvRequest recv;
    const auto finish = [&] {
      const auto start = std::chrono::steady_clock::now();
      recv.wait();
      send.wait();
      cp_attention_times().wait_s += seconds_since(start);
    };
    if (step + 1 < size) {
      incoming = Tensor::empty(shape, own.dtype(), own.device());
      recv = comm::irecv(cp, incoming.buffer(), shape, (rank + size - 1) % size, tag);
      send = comm::isend(cp, current.buffer(), shape, (rank + 1) % size, tag);
      if (!setup.prefetch) finish();
    }
    visit(src, parts_of(unpack(current), 0));
    finish();
    after_step(src);
    if (step + 1 < size) current = incoming;
  }
}

// Block `b` of this rank's queries against `kv`'s keys merged into `partials`.
void attend(const Setup& setup, const std::array<Tensor, 2>& q, const Block& b, const Parts& kv,
            std::array<Partial, 2>& partials) {
  const auto start = std::chrono::steady_clock::now();
  const Shapes& s = setup.shapes;
  const Tensor& query = q[static_cast<std::size_t>(b.query_half)];
  Partial& partial = partials[static_cast<std::size_t>(b.query_half)];
  Tensor o = Tensor::empty(s.chunk, partial.o.dtype(), query.device());
  Tensor lse = Tensor::empty(partial.lse.shape(), partial.lse.dtype(), query.device());
  kernels::attention_forward(query.buffer(), kv[key_part(b.key_half)].buffer(),
                             kv[value_part(b.key_half)].buffer(), s.chunk_len, s.head_dim, b.causal,
                             setup.scale, o.buffer(), lse.buffer());
  kernels::attention_merge(partial.o.buffer(), partial.lse.buffer(), o.buffer(), lse.buffer(),
                           s.head_dim);
  cp_attention_times().compute_s += seconds_since(start);
}

// Block `b`'s gradients: dQ added to dq, dK and dV to dkv's parts.
void attend_backward(const Setup& setup, const std::array<Tensor, 2>& q, const Block& b,
                     const Parts& kv, const std::array<Partial, 2>& partials,
                     const std::array<Tensor, 2>& dout, std::array<Tensor, 2>& dq, Parts& dkv) {
  const auto start = std::chrono::steady_clock::now();
  const Shapes& s = setup.shapes;
  const auto qh = static_cast<std::size_t>(b.query_half);
  const Tensor& query = q[qh];
  const autograd::DType dtype = dout[qh].dtype();
  Tensor block_dq = Tensor::empty(s.chunk, dtype, query.device());
  Tensor block_dk = Tensor::empty(s.chunk, dtype, query.device());
  Tensor block_dv = Tensor::empty(s.chunk, dtype, query.device());
  kernels::attention_backward(
      query.buffer(), kv[key_part(b.key_half)].buffer(), kv[value_part(b.key_half)].buffer(),
      partials[qh].o.buffer(), partials[qh].lse.buffer(), dout[qh].buffer(), s.chunk_len,
      s.head_dim, b.causal, setup.scale, block_dq.buffer(), block_dk.buffer(), block_dv.buffer());
  kernels::axpy(1.0, block_dq.buffer(), dq[qh].buffer());
  kernels::axpy(1.0, block_dk.buffer(), dkv[key_part(b.key_half)].buffer());
  kernels::axpy(1.0, block_dv.buffer(), dkv[value_part(b.key_half)].buffer());
  cp_attention_times().compute_s += seconds_since(start);
}

Parts zero_parts(const Shapes& s, const Tensor& like) {
  Parts parts;
  for (Tensor& part : parts)
    part = Tensor::zeros(s.chunk, like.dtype(), like.device());
  return parts;
}

class ContextParallelAttention final : public autograd::Function {
 public:
  ContextParallelAttention(Setup setup, std::array<Tensor, 2> q, Tensor own,
                           std::array<Partial, 2> partials)
      : setup_(std::move(setup)),
        q_(std::move(q)),
        own_(std::move(own)),
        partials_(std::move(partials)) {}

  std::string name() const override { return "context_parallel_attention"; }

  std::vector<Tensor> backward(const Tensor& grad_output) override {
    autograd::NoGradGuard no_grad;
    const std::array<Tensor, 2> dout = halves(grad_output);
    std::array<Tensor, 2> dq = {
        Tensor::zeros(setup_.shapes.chunk, dout[0].dtype(), dout[0].device()),
        Tensor::zeros(setup_.shapes.chunk, dout[1].dtype(), dout[1].device())};
    const int rank = setup_.cp.rank(), size = setup_.cp.size();
    const bool returned = !fault_active(Fault::ring_attention_dkv_not_returned);
    Parts own_dkv;  // the gradients of this rank's keys and values, once they are complete
    const Tensor& own = own_;
    if (setup_.how == CpComm::all_gather && size > 1) {
      std::vector<Tensor> all;  // every shard's key/value gradients from this rank's queries
      for_each_shard(
          setup_, own, kBackwardTag,
          [&](int src, const Parts& kv) {
            Parts dkv = zero_parts(setup_.shapes, dout[0]);
            for (const Block& b : visible_blocks(rank, src))
              attend_backward(setup_, q_, b, kv, partials_, dout, dq, dkv);
            all.insert(all.end(), dkv.begin(), dkv.end());
          },
          [](int) {});
      const Tensor gathered = pack(all);
      if (returned) {
        Tensor mine = Tensor::empty(own.shape(), gathered.dtype(), own.device());
        comm::reduce_scatter(setup_.cp, gathered.buffer(), mine.buffer(), 1);
        own_dkv = parts_of(unpack(mine), 0);
      } else {
        own_dkv = parts_of(all, static_cast<std::size_t>(rank) * kParts);
      }
    } else {
      Parts travelling = zero_parts(setup_.shapes, dout[0]);  // the current shard's gradients
      for_each_shard(
          setup_, own, kBackwardTag,
          [&](int src, const Parts& kv) {
            for (const Block& b : visible_blocks(rank, src))
              attend_backward(setup_, q_, b, kv, partials_, dout, dq, travelling);
          },
          [&](int src) {
            if (size == 1 || !returned) {
              if (src == rank) own_dkv = travelling;
              travelling = zero_parts(setup_.shapes, dout[0]);
              return;
            }
            // Pass the gradients one step on: after cp steps every shard's reach its owner.
            const std::vector<Tensor> list(travelling.begin(), travelling.end());
            const Tensor out = pack(list);
            Tensor in = Tensor::empty(out.shape(), out.dtype(), out.device());
            const auto start = std::chrono::steady_clock::now();
            comm::RecvRequest recv = comm::irecv(setup_.cp, in.buffer(), out.shape(),
                                                 (rank + size - 1) % size, kGradientTag);
            comm::SendRequest send =
                comm::isend(setup_.cp, out.buffer(), out.shape(), (rank + 1) % size, kGradientTag);
            recv.wait();
            send.wait();
            cp_attention_times().wait_s += seconds_since(start);
            travelling = parts_of(unpack(in), 0);
            if (src == (rank + 1) % size) own_dkv = travelling;  // the last step's: our own
          });
    }
    return {autograd::concat({dq[0], dq[1]}, 2), autograd::concat({own_dkv[0], own_dkv[1]}, 2),
            autograd::concat({own_dkv[2], own_dkv[3]}, 2)};
  }

  void release_saved() override {
    q_ = {};
    own_ = Tensor();
    partials_ = {};
  }

 private:
  Setup setup_;
  std::array<Tensor, 2> q_;
  Tensor own_;  // this rank's packed keys and values, as they cross the wire
  std::array<Partial, 2> partials_;
};

void check_shapes(const Tensor& q, const Tensor& k, const Tensor& v) {
  constexpr const char* op = "context_parallel_attention";
  autograd::check_same_shape(op, q, k);
  autograd::check_same_shape(op, q, v);
  if (q.ndim() != 4 || q.size(2) < 2 || q.size(2) % 2 != 0 || q.size(3) < 1) {
    throw std::invalid_argument(
        fmt::format("{}: q {} is not [batch, heads, seq/cp, head_dim] with an even seq/cp (two "
                    "zigzag chunks)",
                    op, autograd::to_string(q.shape())));
  }
}

}  // namespace

std::string cp_comm_name(CpComm how) {
  return how == CpComm::ring ? "ring" : "all-gather";
}

std::optional<CpComm> parse_cp_comm(const std::string& name) {
  if (name == "ring") return CpComm::ring;
  if (name == "all-gather") return CpComm::all_gather;
  return std::nullopt;
}

CpAttentionTimes& cp_attention_times() {
  thread_local CpAttentionTimes times;
  return times;
}

Tensor context_parallel_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const comm::Communicator& cp, CpComm how, double scale,
                                  bool prefetch) {
  check_shapes(q, k, v);
  autograd::Shape chunk = q.shape();
  chunk[2] /= 2;
  Setup setup{
      cp, how, scale, prefetch,
      Shapes{chunk, static_cast<std::size_t>(chunk[2]), static_cast<std::size_t>(chunk[3])}};
  std::array<Tensor, 2> qh;
  std::array<Partial, 2> partials;
  Tensor own;
  {
    autograd::NoGradGuard no_grad;
    // Under bfloat16 GEMM operands (train --bf16) attention reads q, k and v as bfloat16, as
    // the fused attention does (autograd::scaled_dot_product_attention): the query halves are
    // bfloat16 copies and the key/value shard crosses the wire as its bfloat16 copy (exact for
    // the bfloat16 values context_parallel_attention_core passes); otherwise all as they are.
    qh = halves(autograd::gemm_operand(q.detach()));
    autograd::Shape lse_shape = chunk;
    lse_shape.pop_back();
    for (Partial& partial : partials) {
      partial = {
          Tensor::zeros(chunk, q.dtype(), q.device()),
          Tensor::full(lse_shape, -std::numeric_limits<double>::infinity(), q.dtype(), q.device())};
    }
    const int rank = cp.rank();
    own = autograd::gemm_operand(packed_parts(k.detach(), v.detach()));
    for_each_shard(
        setup, own, kForwardTag,
        [&](int src, const Parts& kv) {
          for (const Block& b : visible_blocks(rank, src))
            attend(setup, qh, b, kv, partials);
        },
        [](int) {});
  }
  const Tensor out = autograd::concat({partials[0].o, partials[1].o}, 2).detach();
  // Backward reads the output as the fused attention keeps it: under bfloat16 GEMM operands its
  // bfloat16 copy, beside those of q, k and v.
  for (Partial& partial : partials)
    partial.o = autograd::gemm_operand(partial.o);
  return autograd::attach(out, std::make_shared<ContextParallelAttention>(setup, qh, own, partials),
                          {q, k, v});
}

}  // namespace mpitron::nn
