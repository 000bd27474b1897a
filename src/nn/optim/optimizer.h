// The interface the training step drives every optimizer through, and the float32 master
// weights of a bfloat16 run.
#pragma once

#include <vector>

#include "autograd/weight_operands.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// An optimizer over a fixed list of parameters whose learning rate may change every step.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// The learning rate of the next `step` (per step, from a schedule). Throws
  /// std::invalid_argument unless lr is finite and >= 0.
  void set_lr(double lr);
  double lr() const { return lr_; }
  /// Applies one update to every parameter that has a gradient (in place, without recording).
  /// With float32 masters (keep_float32_masters) the update goes to the masters, and each
  /// updated master's elements of its parameter become the master rounded to bfloat16, piece by
  /// piece as the update goes (write_master). Given `copies` as well, with masters, the step
  /// also rounds the masters into copies' kept bfloat16 copy of every parameter whose master is
  /// the whole parameter, in the same pass (the bits the next step's GEMMs would round the
  /// parameter to), and marks each copy whose elements were all written refreshed
  /// (autograd::Bf16WeightCopies::mark_refreshed): the next step's GEMMs read it without another
  /// pass over the parameter. A distributed optimizer's shard (the parameter all-gather writes
  /// the rest) marks nothing.
  void step(autograd::Bf16WeightCopies* copies = nullptr);
  /// Sets every parameter's gradient to zero in place (its storage is kept: gradients may be
  /// views of a flat data-parallel buffer); a parameter without a gradient keeps none.
  void zero_grad();
  const Parameters& parameters() const { return parameters_; }

  /// train --bf16's master weights (mixed-precision training: Micikevicius et al. 2018,
  /// arXiv:1710.03740; Megatron-LM's float32 main parameters): from now on the optimizer keeps
  /// a float32 copy of elements `ranges[i]` (row-major) of parameter i, taken from the parameter
  /// now, and updates that copy; after each step the copy, rounded to bfloat16 (to nearest even,
  /// kernels/bf16.h) and widened exactly, is written into those elements of the parameter, which
  /// forward and backward read. Every parameter is rounded so now, whole, so that each holds
  /// bfloat16 values from the first step on. `ranges` are the distributed optimizer's owned
  /// ranges (DataParallelGradients::owned: the all-gather then brings the others' rounded
  /// elements), or each whole parameter. Throws std::invalid_argument when a parameter is not
  /// float32, when `ranges` has another count than the parameters or a range lies outside its
  /// parameter, and std::logic_error when the masters exist already.
  void keep_float32_masters(const std::vector<ElementRange>& ranges);
  /// Whether keep_float32_masters was called.
  bool has_masters() const { return !masters_.empty(); }
  /// The float32 masters, one per parameter, [ranges[i].size()] elements each (for checkpoints:
  /// DataParallelGradients::all_gather_shards assembles them); empty without masters.
  const std::vector<Tensor>& masters() const { return masters_; }

 protected:
  /// Throws std::invalid_argument unless lr is finite and > 0.
  Optimizer(Parameters parameters, double lr);
  /// One update of the values `target` gives (the optimizer's own rule), calling write_master on
  /// every piece of a master it has updated.
  virtual void update() = 0;
  /// With masters: elements [offset, offset + count) of parameter i's master, rounded to
  /// bfloat16 and widened exactly, become those of the parameter (offset counts from the
  /// master's first element). Nothing without masters. Called on a piece just updated, the
  /// rounding reads the master from cache: an AdamW step over 100M parameters with masters took
  /// 82-86 ms (fastest of 8) against 88-92 with a second pass over the masters after the update
  /// (Zen 5, three interleaved rounds).
  void write_master(std::size_t i, std::size_t offset, std::size_t count);
  /// The values to update for parameter i's elements `range`: a view of its float32 master
  /// when there are masters, else of the parameter itself. Throws std::logic_error when masters
  /// exist and `range` is not the master's range.
  kernels::Buffer target(std::size_t i, const ElementRange& range);
  /// The elements of parameter i its master holds, or the whole parameter without masters.
  ElementRange master_range(std::size_t i) const;
  Parameters parameters_;
  double lr_;

 private:
  std::vector<ElementRange> master_ranges_;
  std::vector<Tensor> masters_;
  // During step(): the kept copy each whole-parameter master writes into (undefined: none), and
  // the elements written into it so far.
  std::vector<Tensor> step_copies_;
  std::vector<std::int64_t> copy_written_;
};

}  // namespace mpitron::nn
