// Data parallelism: every replica computes gradients on its own batch, and the gradients are
// averaged over the DP communicator, so each replica applies the gradient of the union of the
// batches (for a mean loss over equal-size batches). As in PyTorch DDP and Megatron-LM's
// gradient buffer, the gradients live in one flat buffer cut into buckets, and a bucket's
// all-reduce starts during backward as soon as its gradients are final. Under the distributed
// optimizer (ZeRO stage 1) a bucket's reduction is a reduce-scatter instead, each replica updates
// only its shard of the parameters, and an all-gather brings the parameters back.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/pending_reduction.h"
#include "nn/parameter.h"

namespace mpitron::nn {

/// The distributed optimizer's layout (ZeRO stage 1: Rajbhandari et al. 2020, arXiv:1910.02054;
/// Megatron-LM's --use-distributed-optimizer).
struct GradientSharding {
  /// Each bucket is padded to a multiple of dp elements and cut into dp equal blocks (cut across
  /// parameter boundaries); DP rank r owns block r of every bucket: only that block's gradient
  /// is averaged over the replicas, and only that part of the parameters is updated there.
  bool enabled = false;
  /// Parameters (by name) that get a bucket of their own, so that copies of one parameter on
  /// different pipeline stages (the tied token embedding) are cut into the same blocks.
  std::vector<std::string> own_bucket;
};

/// The gradients of a fixed list of parameters, laid out in one flat buffer and averaged over a
/// DP communicator.
///
/// The constructor makes every parameter's gradient a view into the flat buffer (copying the
/// gradient it had, or zeros), in reverse parameter order, and cuts the buffer into buckets of
/// at least `bucket_elements` elements (whole parameters; the last layers come first, as
/// backward produces them). Backward then accumulates into the views in place. With dp > 1 each
/// parameter gets a post-accumulate hook: once a parameter has received `backward_passes`
/// gradients since `zero` (one per micro-batch), it is final, and when every parameter of a
/// bucket is final the bucket's all-reduce (sum) starts, overlapping the rest of backward.
/// A parameter that does not require grad when the object is made (a frozen one) gets no hook
/// and is not waited for: its bucket starts when the others in it are final, averaging the
/// frozen gradient's view as it is (zeros unless written in place). `finish` starts the buckets
/// that did not start (parameters no backward reached), waits for all and divides by the
/// replica count. All parameters must share one dtype and device.
/// Replicas must run the same graphs, so buckets start in the same order on every DP rank.
///
/// With `sharding.enabled` and dp > 1 the buckets are reduce-scattered instead (see
/// GradientSharding): after `finish` only the elements in `owned()` hold the average, the others
/// unspecified values. The parameters themselves are moved into a second flat buffer of the same
/// layout (Tensor::move_storage_to), so that `all_gather_parameters` can bring back every
/// replica's updated block with one all-gather per bucket.
/// With dp > 1 a backward pass throws std::logic_error (from the hook) when a gradient grows
/// after its bucket's all-reduce started: more backward passes than `set_backward_passes` said,
/// or a parameter used by two `autograd::recompute` regions (or inside and outside one), whose
/// hook then fires once per region.
class DataParallelGradients {
 public:
  /// 2^20 elements (4 MiB of float32) per bucket by default.
  static constexpr std::size_t kDefaultBucketElements = std::size_t{1} << 20;
  /// A bucket's all-reduce runs as pieces of at most 2^18 elements (1 MiB of float32), queued
  /// in bucket order and started in that order, so every replica starts the same collectives in
  /// the same order. Sharded, a piece is the reduce-scatter of 2^18 / dp elements of each DP
  /// rank's block.
  static constexpr std::size_t kPieceElements = std::size_t{1} << 18;
  /// At most this many pieces are in flight (each may hold MPI's temporary copy of itself:
  /// 2 MiB in all, where whole 4 MiB buckets took 8 MiB); the others start as these complete.
  static constexpr std::size_t kMaxInFlight = 2;

  /// `wire` comm::Wire::bf16 reduces each piece in bfloat16 (Megatron-LM's
  /// --grad-reduce-in-bf16: half the bytes; the float32 gradients are rounded once, summed in
  /// bfloat16 and averaged in float32 again, pending_reduction.h). Throws std::invalid_argument
  /// naming two parameters when dtypes or devices differ, when bucket_elements is 0, and for a
  /// bfloat16 wire on gradients that are not float32.
  DataParallelGradients(const Parameters& parameters, const comm::Communicator& dp,
                        std::size_t bucket_elements = kDefaultBucketElements,
                        const GradientSharding& sharding = {},
                        comm::Wire wire = comm::Wire::native);
  DataParallelGradients(const DataParallelGradients&) = delete;
  DataParallelGradients& operator=(const DataParallelGradients&) = delete;
  /// Removes the hooks; the gradients stay valid (they keep the flat buffer alive).
  ~DataParallelGradients();

  /// Every gradient becomes zero, in place (a gradient replaced since, by set_grad or by clearing
  /// it, is made the flat buffer's view again), and the count of backward passes starts again.
  /// Waits for buckets still in flight first.
  void zero();

  /// The backward passes (micro-batches) that make one step's gradients; default 1. Throws
  /// std::invalid_argument when passes < 1.
  void set_backward_passes(int passes);

  /// After the step's last backward: every gradient becomes the average over the DP replicas.
  /// A gradient the caller replaced (set_grad; cleared gradients that backward made anew) is
  /// copied back into the flat buffer first and averaged like the others (zeros when it is
  /// undefined). Collective over the DP communicator.
  void finish();

  /// True when the buckets are reduce-scattered (sharding enabled and dp > 1).
  bool sharded() const { return sharded_; }
  /// Per parameter, the elements (row-major) this DP rank owns: whose averaged gradient `finish`
  /// leaves and whose update this rank's optimizer makes. The whole parameter unless sharded();
  /// then possibly empty, and the owned ranges of the DP ranks tile each parameter.
  const std::vector<ElementRange>& owned() const { return owned_; }
  /// Sharded: every DP rank's owned part of the parameters is all-gathered into every replica
  /// (one all-gather per bucket), after the optimizer updated the owned parts. Nothing otherwise.
  /// `wire` comm::Wire::bf16 sends each element rounded to bfloat16 and widens it on arrival:
  /// half the bytes, and exact for parameters that hold bfloat16 values (train --bf16's,
  /// Optimizer::keep_float32_masters; Megatron-LM's bfloat16 parameter all-gather). Throws
  /// std::invalid_argument for a bfloat16 wire on parameters that are not float32. Collective
  /// over the DP communicator.
  void all_gather_parameters(comm::Wire wire = comm::Wire::native);
  /// Sharded: the full tensors (the parameters' shapes) whose owned parts are `shards` (one per
  /// parameter, numel owned()[i].size(), e.g. AdamW's sharded moments), assembled from every DP
  /// rank's shards; otherwise `shards` themselves reshaped. Throws std::invalid_argument on a
  /// count or size mismatch. Collective over the DP communicator when sharded.
  std::vector<Tensor> all_gather_shards(const std::vector<Tensor>& shards);
  /// Number of buckets and elements of bucket `i` (padding included; for tests and reports).
  std::size_t bucket_count() const { return buckets_.size(); }
  std::size_t bucket_elements(std::size_t i) const { return buckets_.at(i).buffer.numel(); }
  /// Buckets whose all-reduce has started since the last `zero` / `finish`.
  std::size_t buckets_started() const;

 private:
  // One non-blocking reduction of a bucket's elements [offset, offset + count): an all-reduce,
  // or, sharded, the reduce-scatter of that range of every DP rank's block.
  struct Piece {
    std::size_t bucket = 0;
    std::size_t offset = 0;
    std::size_t count = 0;
  };
  struct Bucket {
    std::size_t start = 0;      // its first element in flat_
    kernels::Buffer buffer;     // a view of flat_
    std::vector<Piece> pieces;  // views of buffer, kPieceElements at most each
    int parameters = 0;         // how many parameters it holds
    int waiting = 0;            // of those, not yet final this step
    bool started = false;       // its pieces are queued or reduced this step
  };
  void on_gradient(std::size_t parameter);
  // Makes the parameter's gradient its view of flat_ again when it is another tensor (replaced
  // by set_grad, or made by backward after the gradient was cleared), copying its values (zeros
  // when it is undefined).
  void take_back(std::size_t parameter);
  void reset_counts();
  // Sharded: every bucket of `flat` (this object's layout) gets every DP rank's block, in the
  // pieces of the reduce-scatter, on `wire` (all_gather_parameters).
  void all_gather_buckets(Tensor& flat, comm::Wire wire);
  // Queues the bucket's pieces and starts what fits.
  void start(Bucket& bucket);
  // Forgets completed pieces and starts queued ones while fewer than kMaxInFlight run.
  void pump();
  // Starts and waits for every queued piece.
  void drain();

  comm::Communicator dp_;
  Parameters parameters_;
  bool sharded_ = false;
  comm::Wire wire_ = comm::Wire::native;
  Tensor flat_;
  Tensor flat_parameters_;               // sharded: the parameters, in flat_'s layout
  std::vector<std::int64_t> offset_of_;  // per parameter, its first element in flat_
  std::vector<Tensor> views_;            // per parameter, its gradient's place in flat_
  std::vector<ElementRange> owned_;      // per parameter
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;  // per parameter
  std::vector<int> passes_seen_;        // per parameter, since zero()
  int backward_passes_ = 1;
  std::vector<Piece*> queued_;  // this step's pieces, in start order
  std::size_t next_piece_ = 0;  // the first of queued_ not yet started
  // Declared last: destroyed (each waiting for its piece) before the buffer they reduce.
  std::array<comm::PendingReduction, kMaxInFlight> in_flight_;
};

}  // namespace mpitron::nn
