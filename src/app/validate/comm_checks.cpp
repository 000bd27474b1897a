#include "app/validate/comm_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include "autograd/ops.h"
#include "comm/algorithm_choice.h"
#include "comm/algorithm_table.h"
#include "comm/collectives.h"
#include "comm/point_to_point.h"
#include "nn/layers/tp_mappings.h"

namespace mpitron::app {

using autograd::Tensor;

namespace {

// One communicator and, from the pure layout, its members' world ranks in group-rank order.
struct Group {
  const char* name;
  const comm::Communicator& comm;
  std::vector<int> members;
  int position;  // this rank's coordinate along the group
};

constexpr std::int64_t kOuter = 2, kChunk = 5, kVector = 7;

std::vector<Group> groups(const comm::ParallelTopology& topo) {
  const int w = topo.world().rank();
  const comm::GroupLayout& layout = topo.layout();
  std::vector<int> world(static_cast<std::size_t>(topo.world().size()));
  std::iota(world.begin(), world.end(), 0);
  return {{"tp", topo.tp_comm(), layout.group(comm::Axis::tp, w), topo.tp_rank()},
          {"pp", topo.pp_comm(), layout.group(comm::Axis::pp, w), topo.pp_rank()},
          {"dp", topo.dp_comm(), layout.group(comm::Axis::dp, w), topo.dp_rank()},
          {"world", topo.world(), world, w}};
}

Tensor make(const ValidateContext& ctx, const std::vector<double>& values, autograd::Shape shape) {
  return Tensor::from_vector(values, shape, autograd::DType::f32, ctx.device);
}

template <class F>
std::vector<double> table(std::int64_t n, F f) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = f(i);
  return v;
}

// A float32 tensor of `shape` on ctx's device holding f(i) at flat index i, written in place
// (no float64 table on the way).
template <class F>
Tensor generated(const ValidateContext& ctx, const autograd::Shape& shape, F f) {
  Tensor host = Tensor::empty(shape, autograd::DType::f32, kernels::Device::cpu);
  float* values = host.buffer().data_as<float>();
  for (std::size_t i = 0; i < host.buffer().numel(); ++i)
    values[i] = static_cast<float>(f(static_cast<std::int64_t>(i)));
  return ctx.device == kernels::Device::cpu ? host : host.to(ctx.device);
}

// Compares the float32 `actual` with expected(i) at each flat index i, reading it in place.
template <class F>
void expect_generated(Comparison& out, const Tensor& actual, F expected) {
  const Tensor host =
      actual.device() == kernels::Device::cpu ? actual : actual.to(kernels::Device::cpu);
  const float* values = host.buffer().data_as<float>();
  out.expect_close_each(
      host.buffer().numel(), [&](std::size_t i) { return static_cast<double>(values[i]); },
      [&](std::size_t i) { return static_cast<double>(expected(static_cast<std::int64_t>(i))); });
}

// All-reduce sum, avg and max, all-gather, reduce-scatter and broadcast over `g`.
void expect_collectives(const ValidateContext& ctx, const Group& g, Comparison& out) {
  const double w = g.members[static_cast<std::size_t>(g.position)];
  const auto n = static_cast<double>(g.members.size());
  double sum = 0.0;
  for (int m : g.members)
    sum += m + 1;
  const double lowest = *std::min_element(g.members.begin(), g.members.end());
  const double highest = *std::max_element(g.members.begin(), g.members.end());

  for (const comm::ReduceOp op : {comm::ReduceOp::sum, comm::ReduceOp::avg}) {
    Tensor x = make(ctx, table(kVector, [&](auto i) { return (w + 1) * (i + 1); }), {kVector});
    comm::all_reduce(g.comm, x.buffer(), op);
    const double factor = op == comm::ReduceOp::sum ? sum : sum / n;
    out.expect_close(x.to_vector(), table(kVector, [&](auto i) { return factor * (i + 1); }));
  }
  Tensor x = make(ctx, table(kVector, [&](auto i) { return (i % 2 ? w : -w) + i; }), {kVector});
  comm::all_reduce(g.comm, x.buffer(), comm::ReduceOp::max);
  out.expect_close(x.to_vector(),
                   table(kVector, [&](auto i) { return (i % 2 ? highest : -lowest) + i; }));

  const auto size = static_cast<std::int64_t>(g.members.size());
  const Tensor part =
      make(ctx, table(kOuter * kChunk, [&](auto i) { return 100 * w + i; }), {kOuter, kChunk});
  Tensor gathered = Tensor::empty({kOuter, size * kChunk}, autograd::DType::f32, ctx.device);
  comm::all_gather(g.comm, part.buffer(), gathered.buffer(), kOuter);
  out.expect_close(gathered.to_vector(), table(kOuter * size * kChunk, [&](auto i) {
                     const auto o = i / (size * kChunk), k = i % (size * kChunk) / kChunk;
                     return 100.0 * g.members[static_cast<std::size_t>(k)] + o * kChunk +
                            i % kChunk;
                   }));

  const Tensor wide = make(ctx, table(kOuter * size * kChunk, [&](auto i) { return (w + 1) * i; }),
                           {kOuter, size * kChunk});
  Tensor scattered = Tensor::empty({kOuter, kChunk}, autograd::DType::f32, ctx.device);
  comm::reduce_scatter(g.comm, wide.buffer(), scattered.buffer(), kOuter);
  out.expect_close(scattered.to_vector(), table(kOuter * kChunk, [&](auto i) {
                     return sum * ((i / kChunk) * size * kChunk + g.position * kChunk + i % kChunk);
                   }));

  Tensor b = make(ctx, table(kVector, [&](auto i) { return 10 * w + i; }), {kVector});
  comm::broadcast(g.comm, b.buffer(), static_cast<int>(size) - 1);
  out.expect_close(b.to_vector(),
                   table(kVector, [&](auto i) { return 10.0 * g.members.back() + i; }));
}

// Each stage sends to the next around the ring (the last to the first); stage 0 sends first and
// every other stage receives first, so the ring cannot deadlock.
void expect_ring(const ValidateContext& ctx, const Group& pp, Comparison& out) {
  const auto n = static_cast<int>(pp.members.size());
  if (n == 1) return;
  const double w = pp.members[static_cast<std::size_t>(pp.position)];
  const autograd::Shape shape{kOuter, kChunk};
  const Tensor mine = make(ctx, table(kOuter * kChunk, [&](auto i) { return 100 * w + i; }), shape);
  Tensor received = Tensor::empty(shape, autograd::DType::f32, ctx.device);
  const int next = (pp.position + 1) % n, prev = (pp.position + n - 1) % n;
  if (pp.position == 0) comm::send(pp.comm, mine.buffer(), shape, next);
  comm::recv(pp.comm, received.buffer(), shape, prev);
  if (pp.position != 0) comm::send(pp.comm, mine.buffer(), shape, next);
  out.expect_close(received.to_vector(), table(kOuter * kChunk, [&](auto i) {
                     return 100.0 * pp.members[static_cast<std::size_t>(prev)] + i;
                   }));
}

// copy_to_tp, reduce_from_tp, gather_from_tp and scatter_to_tp, forward and backward.
void expect_mappings(const ValidateContext& ctx, const Group& tp, Comparison& out) {
  const auto size = static_cast<std::int64_t>(tp.members.size());
  const double t = tp.position;
  const auto sum_t1 = static_cast<double>(size * (size + 1) / 2);  // sum over ranks of (t + 1)
  const autograd::Shape local{kOuter, kChunk}, full{kOuter, size * kChunk};
  const auto own = [&](auto i) {  // index into `full` of this rank's element i of `local`
    return i / kChunk * size * kChunk + tp.position * kChunk + i % kChunk;
  };
  const auto n_local = kOuter * kChunk, n_full = kOuter * size * kChunk;

  Tensor x = make(ctx, table(n_local, [](auto i) { return i; }), local).set_requires_grad();
  Tensor copied = nn::copy_to_tp(x, tp.comm);
  out.expect_close(copied.to_vector(), table(n_local, [](auto i) { return i; }));
  copied.backward(make(ctx, table(n_local, [&](auto i) { return (t + 1) * i; }), local));
  out.expect_close(x.grad().to_vector(), table(n_local, [&](auto i) { return sum_t1 * i; }));

  Tensor y =
      make(ctx, table(n_local, [&](auto i) { return (t + 1) * i; }), local).set_requires_grad();
  Tensor reduced = nn::reduce_from_tp(y, tp.comm);
  out.expect_close(reduced.to_vector(), table(n_local, [&](auto i) { return sum_t1 * i; }));
  reduced.backward(make(ctx, table(n_local, [](auto i) { return i + 1; }), local));
  out.expect_close(y.grad().to_vector(), table(n_local, [](auto i) { return i + 1; }));

  Tensor shard =
      make(ctx, table(n_local, [&](auto i) { return 100 * t + i; }), local).set_requires_grad();
  Tensor gathered = nn::gather_from_tp(shard, tp.comm);
  out.expect_close(gathered.to_vector(), table(n_full, [&](auto i) {
                     return 100.0 * (i % (size * kChunk) / kChunk) + i / (size * kChunk) * kChunk +
                            i % kChunk;
                   }));
  gathered.backward(make(ctx, table(n_full, [](auto i) { return 1000 + i; }), full));
  out.expect_close(shard.grad().to_vector(),
                   table(n_local, [&](auto i) { return 1000.0 + own(i); }));

  Tensor whole = make(ctx, table(n_full, [](auto i) { return i; }), full).set_requires_grad();
  Tensor scattered = nn::scatter_to_tp(whole, tp.comm);
  out.expect_close(scattered.to_vector(), table(n_local, [&](auto i) { return 1.0 * own(i); }));
  scattered.backward(make(ctx, table(n_local, [&](auto i) { return 100 * t + i; }), local));
  out.expect_close(whole.grad().to_vector(), table(n_full, [&](auto i) {
                     return 100.0 * (i % (size * kChunk) / kChunk) + i / (size * kChunk) * kChunk +
                            i % kChunk;
                   }));
}

// How the name of the every-algorithm check names `algorithm` of `op`.
std::string taken_name(comm::Collective op, comm::Algorithm algorithm) {
  switch (algorithm) {
    case comm::Algorithm::rabenseifner:
      return "Rabenseifner";
    case comm::Algorithm::recursive_halving:
      return "recursive halving";
    case comm::Algorithm::recursive_doubling:
      return op == comm::Collective::all_reduce ? "recursive doubling"
                                                : "recursive-doubling all-gather";
    case comm::Algorithm::ring:
      return "ring " + std::string(comm::to_string(op));
    case comm::Algorithm::mpi:
      return "MPI " + std::string(comm::to_string(op));
  }
  return "?";
}

// Elements of the every-algorithm check's buffers: the all-reduce buffer, and each rank's block
// of all-gather and reduce-scatter. Both are odd, so no power-of-two group divides them, and
// their transfers are one to several eager pieces (eager.h), most with a partial last one.
constexpr std::int64_t kAllReduceElements = 6003, kBlockElements = 1501;

// `taken`, the algorithm `op` took on `g` for a buffer of `numel` elements (all-reduce) or a
// group's blocks (numel = group size), after checking that it is the `forced` one wherever the
// group can run it (host buffers MPI reads in place, comm::applicable): a table that stopped
// forcing would leave the check proving only the built-in rule. Throws std::logic_error then.
comm::Algorithm forced_taken(const ValidateContext& ctx, const Group& g, comm::Collective op,
                             comm::Algorithm forced, comm::Algorithm taken, std::size_t numel) {
  const bool runs = ctx.device == kernels::Device::cpu && !g.comm.stage_host_buffers() &&
                    comm::applicable(op, forced, g.comm.size(), numel, true);
  if (runs && taken != forced) {
    throw std::logic_error(
        fmt::format("validate: {} on the {} communicator took {} where {} was "
                    "forced",
                    comm::to_string(op), g.name, comm::to_string(taken), comm::to_string(forced)));
  }
  return taken;
}

// Runs `run()`, one collective `op` over `g` that compares its result and returns the algorithm
// it took, once with each algorithm of `op` forced (comm::ForcedAlgorithm); adds the names of the
// algorithms taken to `taken`. `numel` is forced_taken's.
template <class Run>
void each_forced(const ValidateContext& ctx, const Group& g, comm::Collective op, std::size_t numel,
                 std::set<std::string>& taken, Run run) {
  for (const comm::Algorithm algorithm : comm::algorithms_for(op)) {
    const comm::ForcedAlgorithm forced(ctx.topology.world(), op, g.comm.size(), algorithm);
    taken.insert(taken_name(op, forced_taken(ctx, g, op, algorithm, run(), numel)));
  }
}

// Every algorithm of all-reduce (sum), all-gather and reduce-scatter over `g`, each forced in
// turn, which the rule or a comm table would otherwise choose only at their sizes. Adds the
// names of the algorithms taken to `taken`: one a group cannot run (Rabenseifner's or recursive
// halving on a group that is no power of two, anything but MPI's on CUDA buffers) takes the
// built-in rule instead.
void expect_every_algorithm(const ValidateContext& ctx, const Group& g, Comparison& out,
                            std::set<std::string>& taken) {
  const double w = g.members[static_cast<std::size_t>(g.position)];
  double sum = 0.0;
  for (int m : g.members)
    sum += m + 1;
  // Residues keep every value and sum a small integer, exact in float32.
  const auto residue = [](std::int64_t i) { return static_cast<double>(i % 997 + 1); };
  each_forced(ctx, g, comm::Collective::all_reduce, kAllReduceElements, taken, [&] {
    Tensor x = generated(ctx, {kAllReduceElements}, [&](auto i) { return (w + 1) * residue(i); });
    const comm::Algorithm algorithm = comm::all_reduce_algorithm(g.comm, x.buffer());
    comm::all_reduce(g.comm, x.buffer(), comm::ReduceOp::sum);
    expect_generated(out, x, [&](auto i) { return sum * residue(i); });
    return algorithm;
  });
  const std::int64_t size = g.comm.size(), count = kBlockElements;
  const auto ranks = static_cast<std::size_t>(size);
  each_forced(ctx, g, comm::Collective::all_gather, ranks, taken, [&] {
    const Tensor part = generated(ctx, {1, count}, [&](auto i) { return 1000 * w + residue(i); });
    Tensor gathered = Tensor::empty({1, size * count}, autograd::DType::f32, ctx.device);
    const comm::Algorithm algorithm = comm::all_gather_algorithm(g.comm, part.buffer());
    comm::all_gather(g.comm, part.buffer(), gathered.buffer(), 1);
    expect_generated(out, gathered, [&](auto i) {
      return 1000.0 * g.members[static_cast<std::size_t>(i / count)] + residue(i % count);
    });
    return algorithm;
  });
  each_forced(ctx, g, comm::Collective::reduce_scatter, ranks, taken, [&] {
    const Tensor wide =
        generated(ctx, {1, size * count}, [&](auto i) { return (w + 1) * residue(i); });
    Tensor scattered = Tensor::empty({1, count}, autograd::DType::f32, ctx.device);
    const comm::Algorithm algorithm = comm::reduce_scatter_algorithm(g.comm, wide.buffer());
    comm::reduce_scatter(g.comm, wide.buffer(), scattered.buffer(), 1);
    expect_generated(out, scattered, [&](auto i) { return sum * residue(g.position * count + i); });
    return algorithm;
  });
}

// Lowers the message limit of the whole communicator family, restoring it on every exit.
class MessageLimit {
 public:
  MessageLimit(comm::Communicator world, std::size_t elements)
      : world_(std::move(world)), saved_(world_.max_message_elements()) {
    world_.set_max_message_elements(elements);
  }
  ~MessageLimit() { world_.set_max_message_elements(saved_); }
  MessageLimit(const MessageLimit&) = delete;
  MessageLimit& operator=(const MessageLimit&) = delete;

 private:
  comm::Communicator world_;
  std::size_t saved_;
};

}  // namespace

std::vector<LocalCheck> check_communication(const ValidateContext& ctx) {
  const comm::ParallelTopology& topo = ctx.topology;
  std::vector<LocalCheck> checks;
  for (const Group& g : groups(topo)) {
    LocalCheck check{fmt::format("COMM: {} all-reduce (sum, avg, max), all-gather, "
                                 "reduce-scatter, broadcast{} match closed form",
                                 g.name, std::string(g.name) == "pp" ? ", ring send/recv" : ""),
                     Comparison(ctx.tolerance), trivial_at(g.name, g.comm.size())};
    expect_collectives(ctx, g, check.comparison);
    if (std::string(g.name) == "pp") expect_ring(ctx, g, check.comparison);
    checks.push_back(check);
  }
  LocalCheck chunked{fmt::format("COMM: all of the above in {}-element messages match closed form",
                                 kChunkedMessageElements),
                     Comparison(ctx.tolerance), trivial_at("world", topo.world().size())};
  {
    const MessageLimit limit(topo.world(), kChunkedMessageElements);
    for (const Group& g : groups(topo)) {
      expect_collectives(ctx, g, chunked.comparison);
      if (std::string(g.name) == "pp") expect_ring(ctx, g, chunked.comparison);
    }
  }
  checks.push_back(chunked);
  {
    Comparison every(ctx.tolerance);
    std::set<std::string> taken;
    for (const Group& g : groups(topo)) {
      if (g.comm.size() > 1) expect_every_algorithm(ctx, g, every, taken);
    }
    checks.push_back(
        {fmt::format("COMM: every algorithm of all-reduce, all-gather and reduce-scatter ({}) "
                     "matches closed form",
                     taken.empty() ? "none: one rank" : fmt::format("{}", fmt::join(taken, ", "))),
         every, trivial_at("world", topo.world().size())});
  }
  LocalCheck mappings{
      "COMM: TP mappings (copy, reduce, gather, scatter) forward and backward "
      "match closed form",
      Comparison(ctx.tolerance), trivial_at("tp", topo.tp())};
  expect_mappings(ctx, groups(topo)[0], mappings.comparison);
  checks.push_back(mappings);
  return checks;
}

}  // namespace mpitron::app
