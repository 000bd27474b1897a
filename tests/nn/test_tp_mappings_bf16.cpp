// The TP and SP mappings under bfloat16 GEMM operands (train --bf16): every collective carries a
// float32 tensor as bfloat16, forward and backward. Each mapping's result is compared bit for bit
// with a reference built here from every rank's values: each rank's value rounded to bfloat16
// (round to nearest even), a sum combined as comm sums a power of two of ranks (docs/comm.md,
// "bfloat16 reductions"), each combination added in float32 and rounded once, the result widened
// exactly. With float32 operands, and for float64 tensors, the same references without rounding.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <vector>

#include "autograd/ops.h"
#include "autograd/random.h"
#include "comm/collectives.h"
#include "comm/traffic.h"
#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "nn/layers/linear.h"
#include "nn/layers/tp_mappings.h"
#include "nn_test_support.h"

namespace mpitron::nn {
namespace {

using autograd::Shape;
using autograd::Tensor;

constexpr std::int64_t kBatch = 2, kRows = 3, kHidden = 4;

// What a tensor of `dtype` crossing the TP group becomes on the wire: bfloat16 for float32 under
// bfloat16 operands on more than one rank.
bool bf16_wire(kernels::GemmOperands operands, autograd::DType dtype, int ranks) {
  return operands == kernels::GemmOperands::bfloat16 && dtype == autograd::DType::f32 && ranks > 1;
}

float on_wire(float x, bool bf16) {
  return bf16 ? kernels::bf16_to_float(kernels::to_bf16(x)) : x;
}

// Rank `rank`'s values: float32 values that bfloat16 does not hold, different on each rank and
// element, some of each sign.
std::vector<float> values_of(int rank, std::size_t numel) {
  std::vector<float> values(numel);
  for (std::size_t i = 0; i < numel; ++i)
    values[i] = static_cast<float>((1.0 / 3.0 + 0.01 * static_cast<double>(i)) *
                                   (i % 3 == 0 ? -1.0 : 1.0) * (1.0 + 0.1 * rank));
  return values;
}

Tensor tensor_of(int rank, const Shape& shape, autograd::DType dtype) {
  std::size_t numel = 1;
  for (const std::int64_t d : shape)
    numel *= static_cast<std::size_t>(d);
  const std::vector<float> values = values_of(rank, numel);
  return Tensor::from_vector(std::vector<double>(values.begin(), values.end()), shape, dtype);
}

// Element i of every rank's values summed as comm sums n = 2^k ranks: a butterfly over the rank
// bits, lowest bit first for an all-reduce (recursive doubling), highest first for a
// reduce-scatter (recursive halving). Each combination adds in T (float32 also for the bfloat16
// wire) and, on the bfloat16 wire, rounds once.
template <class T>
T butterfly_sum(int n, std::size_t i, bool lowest_bit_first, bool bf16) {
  std::vector<T> v;
  for (int r = 0; r < n; ++r)
    v.push_back(static_cast<T>(on_wire(values_of(r, i + 1)[i], bf16)));
  for (int k = 0; (1 << k) < n; ++k) {
    const int bit = lowest_bit_first ? 1 << k : n >> (k + 1);
    for (int r = 0; r < n; ++r) {
      if ((r & bit) == 0) {
        const T sum = v[static_cast<std::size_t>(r)] + v[static_cast<std::size_t>(r | bit)];
        v[static_cast<std::size_t>(r)] =
            bf16 ? static_cast<T>(on_wire(static_cast<float>(sum), true)) : sum;
      }
    }
  }
  return v[0];
}

double reference_sum(autograd::DType dtype, int n, std::size_t i, bool lowest_bit_first,
                     bool bf16) {
  return dtype == autograd::DType::f64 ? butterfly_sum<double>(n, i, lowest_bit_first, false)
                                       : butterfly_sum<float>(n, i, lowest_bit_first, bf16);
}

// Element (b, s, h) of a [kBatch, seq, kHidden] tensor.
std::size_t at(std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t seq) {
  return static_cast<std::size_t>((b * seq + s) * kHidden + h);
}

// One direction of one mapping: `run` maps this rank's tensor of `input` shape (rank r's values),
// `expected(i)` is element i of the result, the mapping's forward and backward hand `sent`
// elements to the group in all, and `replicated` results are the same on every rank.
struct Direction {
  std::function<Tensor(const Tensor&)> run;
  Shape input;
  std::function<double(std::size_t)> expected;
  std::size_t sent;
  bool replicated;
};

// Every rank's result is bit-identical: each rank's elements against rank 0's.
void expect_the_same_on_every_rank(const Tensor& result, const comm::Communicator& tp) {
  const kernels::Buffer mine = result.buffer().to(kernels::Device::cpu);
  kernels::Buffer all(mine.numel() * static_cast<std::size_t>(tp.size()), mine.dtype(),
                      kernels::Device::cpu);
  comm::all_gather(tp, mine, all, 1);
  const Tensor gathered = Tensor::from_buffer(std::move(all), {tp.size(), result.numel()});
  const std::vector<double> values = gathered.to_vector();
  for (int r = 1; r < tp.size(); ++r)
    for (std::int64_t i = 0; i < result.numel(); ++i)
      EXPECT_EQ(values[static_cast<std::size_t>(r * result.numel() + i)],
                values[static_cast<std::size_t>(i)])
          << "rank " << r << " element " << i;
}

// Runs `direction` on this rank's values and checks its result and the bytes the tp group counts
// for it: `sent` x 2 on the bfloat16 wire, `sent` x the dtype's size otherwise.
void check(const Direction& direction, autograd::DType dtype, bool bf16,
           const comm::Communicator& tp) {
  const Tensor x = tensor_of(tp.rank(), direction.input, dtype);
  const comm::Traffic before = comm::traffic();
  const Tensor y = direction.run(x);
  const std::uint64_t bytes = comm::traffic_since(before, comm::traffic())[tp.name()];
  EXPECT_EQ(bytes, tp.size() == 1 ? 0u : direction.sent * (bf16 ? 2u : kernels::dtype_size(dtype)));
  ASSERT_EQ(y.dtype(), dtype);
  const std::vector<double> got = y.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], direction.expected(i)) << "element " << i;
  if (direction.replicated) expect_the_same_on_every_rank(y, tp);
}

// The backward of `mapping` on an input of `input` shape: the gradient that reaches the input
// when the output gradient holds this rank's values (the forward runs first, on zeros).
std::function<Tensor(const Tensor&)> backward_of(Tensor (*mapping)(const Tensor&,
                                                                   const comm::Communicator&),
                                                 const comm::Communicator& tp, const Shape& input) {
  return [mapping, &tp, input](const Tensor& grad_output) {
    Tensor x = Tensor::zeros(input, grad_output.dtype()).set_requires_grad();
    mapping(x, tp).backward(grad_output);
    return x.grad();
  };
}

// Every direction of every mapping that communicates, on this rank's values.
std::vector<std::pair<const char*, Direction>> directions(autograd::DType dtype, bool bf16,
                                                          const comm::Communicator& tp) {
  const int n = tp.size();
  const int me = tp.rank();
  const std::int64_t seq = kRows * n;
  const Shape full{kBatch, seq, kHidden}, rows{kBatch, kRows, kHidden};
  const std::size_t full_numel = kBatch * seq * kHidden, rows_numel = kBatch * kRows * kHidden;
  const auto all_reduced = [=](std::size_t i) { return reference_sum(dtype, n, i, true, bf16); };
  // This rank's rows of the sum, reduce-scattered.
  const auto reduce_scattered = [=](std::size_t i) {
    const std::int64_t b = static_cast<std::int64_t>(i) / (kRows * kHidden);
    const std::int64_t s = static_cast<std::int64_t>(i) / kHidden % kRows;
    const std::int64_t h = static_cast<std::int64_t>(i) % kHidden;
    return reference_sum(dtype, n, at(b, me * kRows + s, h, seq), false, bf16);
  };
  // Row s of the result is rank s / kRows's row s % kRows, as the wire carries it.
  const auto sequence_gathered = [=](std::size_t i) {
    const std::int64_t b = static_cast<std::int64_t>(i) / (seq * kHidden);
    const std::int64_t s = static_cast<std::int64_t>(i) / kHidden % seq;
    const std::int64_t h = static_cast<std::int64_t>(i) % kHidden;
    const int owner = static_cast<int>(s / kRows);
    return static_cast<double>(
        on_wire(values_of(owner, rows_numel)[at(b, s % kRows, h, kRows)], bf16));
  };
  // Column c of a [2, 3 n] result is rank c / 3's column c % 3.
  const auto columns_gathered = [=](std::size_t i) {
    const std::size_t row = i / (3 * n), col = i % (3 * n);
    return static_cast<double>(
        on_wire(values_of(static_cast<int>(col / 3), 6)[row * 3 + col % 3], bf16));
  };
  const auto forward_of = [&](Tensor (*mapping)(const Tensor&, const comm::Communicator&)) {
    return [mapping, &tp](const Tensor& x) { return mapping(x, tp); };
  };
  // The forward of a backward direction sends as much as the backward when both are a
  // collective (an all-gather's shard is a reduce-scatter's output).
  return {
      {"reduce_from_tp forward", {forward_of(reduce_from_tp), full, all_reduced, full_numel, true}},
      {"copy_to_tp backward",
       {backward_of(copy_to_tp, tp, full), full, all_reduced, full_numel, true}},
      {"reduce_scatter_to_sequence_parallel_region forward",
       {forward_of(reduce_scatter_to_sequence_parallel_region), full, reduce_scattered, full_numel,
        false}},
      {"gather_from_sequence_parallel_region backward",
       {backward_of(gather_from_sequence_parallel_region, tp, rows), full, reduce_scattered,
        rows_numel + full_numel, false}},
      {"gather_from_sequence_parallel_region forward",
       {forward_of(gather_from_sequence_parallel_region), rows, sequence_gathered, rows_numel,
        true}},
      {"reduce_scatter_to_sequence_parallel_region backward",
       {backward_of(reduce_scatter_to_sequence_parallel_region, tp, full), rows, sequence_gathered,
        full_numel + rows_numel, true}},
      {"scatter_to_sequence_parallel_region backward",
       {backward_of(scatter_to_sequence_parallel_region, tp, full), rows, sequence_gathered,
        rows_numel, true}},
      {"gather_from_tp forward", {forward_of(gather_from_tp), {2, 3}, columns_gathered, 6, true}},
      {"scatter_to_tp backward",
       {backward_of(scatter_to_tp, tp, {2, 3 * static_cast<std::int64_t>(n)}),
        {2, 3},
        columns_gathered,
        6,
        true}},
  };
}

// Under bfloat16 operands each float32 collective carries bfloat16 (half the bytes); with
// float32 operands, and for float64 tensors under either, nothing is rounded.
TEST(TpMappingsBf16, EveryCollectiveCarriesBfloat16UnderBfloat16Operands) {
  const comm::Communicator& tp = test::world();
  for (const auto operands : {kernels::GemmOperands::float32, kernels::GemmOperands::bfloat16}) {
    for (const autograd::DType dtype : {autograd::DType::f32, autograd::DType::f64}) {
      const bool bf16 = bf16_wire(operands, dtype, tp.size());
      const kernels::GemmOperandsScope scope(operands);
      for (const auto& [name, direction] : directions(dtype, bf16, tp)) {
        SCOPED_TRACE(std::string(name) +
                     (operands == kernels::GemmOperands::bfloat16 ? ", bfloat16 operands, "
                                                                  : ", float32 operands, ") +
                     kernels::to_string(dtype));
        check(direction, dtype, bf16, tp);
      }
    }
  }
}

// The bfloat16 sum rounds each rank's value and each combination, so on more than one rank it
// differs from the float32 sum rounded once: the wire is not a rounding of the float32 result.
TEST(TpMappingsBf16, TheSumRoundsEachPartial) {
  const comm::Communicator& tp = test::world();
  if (tp.size() == 1) GTEST_SKIP() << "one rank sends nothing";
  std::size_t differ = 0;
  const std::size_t numel = kBatch * kRows * tp.size() * kHidden;
  for (std::size_t i = 0; i < numel; ++i) {
    const float wide = butterfly_sum<float>(tp.size(), i, true, false);
    differ += on_wire(wide, true) != butterfly_sum<float>(tp.size(), i, true, true);
  }
  EXPECT_GT(differ, 0u);
}

// The same values as a bfloat16 tensor, each rounded to nearest even.
Tensor rounded(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), autograd::DType::bf16);
  kernels::convert(x.buffer(), out.buffer());
  return out;
}

// A row-parallel partial written as bfloat16 (where reduces_as_bf16) is reduced as it is: the
// float32 result of the float32 partial it was rounded from, bit for bit, with the same bytes on
// the wire (the gradient: ARowParallelLayerWritesItsPartialAsBfloat16). Where the reductions
// carry float32 (one rank, or float32 operands) a bfloat16 partial is refused, and a gather
// refuses a bfloat16 input everywhere.
TEST(TpMappingsBf16, ABfloat16PartialGivesTheBitsOfItsFloat32Partial) {
  const comm::Communicator& tp = test::world();
  const Shape full{kBatch, kRows * tp.size(), kHidden};
  for (const auto operands : {kernels::GemmOperands::float32, kernels::GemmOperands::bfloat16}) {
    const kernels::GemmOperandsScope scope(operands);
    const Tensor rows = tensor_of(tp.rank(), {kBatch, kRows, kHidden}, autograd::DType::f32);
    EXPECT_THROW(gather_from_sequence_parallel_region(rounded(rows), tp), std::invalid_argument);
    EXPECT_THROW(gather_from_tp(rounded(rows), tp), std::invalid_argument);
    for (const auto mapping : {reduce_from_tp, reduce_scatter_to_sequence_parallel_region}) {
      const Tensor x = tensor_of(tp.rank(), full, autograd::DType::f32);
      if (!reduces_as_bf16(autograd::Device::cpu, tp)) {
        EXPECT_FALSE(operands == kernels::GemmOperands::bfloat16 && tp.size() > 1);
        EXPECT_THROW(mapping(rounded(x), tp), std::invalid_argument);
        continue;
      }
      const comm::Traffic before = comm::traffic();
      const Tensor y = mapping(x, tp);
      const comm::Traffic middle = comm::traffic();
      const Tensor y16 = mapping(rounded(x), tp);
      EXPECT_EQ(comm::traffic_since(middle, comm::traffic())[tp.name()],
                comm::traffic_since(before, middle)[tp.name()]);
      ASSERT_EQ(y16.dtype(), autograd::DType::f32);
      EXPECT_EQ(y16.to_vector(), y.to_vector());
    }
  }
}

// Under bfloat16 operands on more than one rank a row-parallel layer writes its partial as
// bfloat16 (Megatron-LM's bfloat16 output), and its output and input gradient keep the bits of
// the float32 partial reduced as bfloat16: the reduction rounded it to the same values.
TEST(TpMappingsBf16, ARowParallelLayerWritesItsPartialAsBfloat16) {
  const comm::Communicator& tp = test::world();
  const kernels::GemmOperandsScope scope(kernels::GemmOperands::bfloat16);
  const LinearWeights weights{autograd::randn({6, 4 * static_cast<std::int64_t>(tp.size())}, 3),
                              Tensor()};
  const RowParallelLinear row(weights, tp, /*input_is_parallel=*/true);
  const Tensor x =
      autograd::randn({kBatch, kRows, 4}, 4 + static_cast<unsigned>(tp.rank())).set_requires_grad();
  EXPECT_EQ(row.bf16_partial(x), tp.size() > 1);
  EXPECT_EQ(row.partial(x).dtype(), tp.size() > 1 ? autograd::DType::bf16 : autograd::DType::f32);
  const Tensor y = row.forward(x);
  const Tensor x32 = x.detach().set_requires_grad();
  const Tensor y32 = reduce_from_tp(autograd::linear(x32, row.weight()), tp);
  ASSERT_EQ(y.dtype(), autograd::DType::f32);
  EXPECT_EQ(y.to_vector(), y32.to_vector());
  const Tensor grad = autograd::randn(y.shape(), 5);
  y.backward(grad);
  y32.backward(grad);
  EXPECT_EQ(x.grad().to_vector(), x32.grad().to_vector());
}

}  // namespace
}  // namespace mpitron::nn
