#pragma once
/// ZeRO-1: the optimizer of one gradient reducer whose buckets are
/// reduce-scattered over its group (Reducer.h, ZeroLayout.h). Every rank of
/// the group holds the whole parameters but keeps optimizer states only for
/// its range of each bucket: one flat tensor per state and bucket, S elements
/// (exp_avg and exp_avg_sq for Adam(W), momentum_buffer for SGD). A step
/// updates the owned elements from the reduced gradient shard with the same
/// element-wise math as Optimizer (bit-identical to it on the same
/// gradients), then all-gathers the parameters.
///
/// Under mixed precision (the reducer has main grads) the float32 masters
/// are sharded too, as in Megatron-LM's distributed optimizer: `params` are
/// the whole masters when it is built, it copies its range of each bucket
/// into one more flat of S float32 elements, and the caller may then release
/// them (MixedPrecision::releaseMaster). A step updates that flat and
/// all-gathers it into the low-precision parameters: rounded first (half the
/// bytes) where the group's backend carries that dtype natively, else in
/// float32 and rounded as it is copied out (the same bits). gatherMasters()
/// assembles whole masters for a checkpoint and loadMaster() takes one back.
///
/// ZeRO-3 (the reducer's unit buckets, Zero3.h): the parameters of such a
/// bucket are whole only while their unit runs, so this rank's range of
/// their values lives here, as the masters do under mixed precision (one
/// flat of S elements, float32 or the parameters' dtype). A step updates it
/// and gathers nothing for those buckets; Zero3Params gathers gatherSource()
/// when the unit runs next.
///
/// State keys (checkpoints): "<local>/step" (float32 scalar, every rank) and,
/// per owned piece, "<local>/<field>@<offset>": a 1-D tensor holding
/// elements [offset, offset + numel) of that state in the local shard's
/// flattened order. loadState also takes whole-shard "<local>/<field>"
/// tensors (a merged checkpoint's) and keeps the owned ranges.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Optimizer.h"
#include "nnsc/Runtime/Reducer.h"

namespace nnsc::rt {

class ZeroOptimizer {
public:
  /// `params` are the reducer's parameters, in its order (same leaves). The
  /// reducer must have been built with scatter and outlive this.
  ZeroOptimizer(const OptimizerConfig &config, Reducer &reducer, std::vector<OptimParam> params);

  /// Updates the owned elements at learning rate `lr` from the gradient
  /// shards of the last finish(), then all-gathers the parameters.
  Status step(double lr);
  /// Zeroes the parameters' local grads in place.
  void zeroGrad();

  /// This rank's sum of squares of its gradient shards, a float64 scalar
  /// (no host synchronisation), divided by the ranks holding the same shards
  /// (ZeRO in blocks: one per block), so the job's sum counts each once.
  at::Tensor gradSquareSum() const;
  /// Multiplies the gradient shards by `coef` (a scalar tensor).
  void scaleGrads(const at::Tensor &coef);

  std::map<std::string, at::Tensor> state() const;
  /// Restores state() of a run with the same layout, or whole-shard states.
  /// Every key must name one of this optimizer's parameters.
  Status loadState(const std::map<std::string, at::Tensor> &state, const std::string &from);
  /// True when `local` is one of this optimizer's parameters.
  bool has(const std::string &local) const { return index_.count(local) > 0; }
  /// Bytes of the optimizer states this rank holds, float32 master ranges
  /// included (mixed precision; not ZeRO-3's ranges of float32 values).
  int64_t stateBytes() const;
  /// Mixed precision: true when this optimizer holds the masters' ranges.
  bool shardsMasters() const { return masterDtype_.has_value(); }
  /// ZeRO-3: true when parameter `local` is in a unit bucket (its values
  /// are held here as ranges, the parameter whole only while its unit runs).
  bool shardsValues(const std::string &local) const;
  /// Every rank of the group together: the whole float32 master of every
  /// parameter under mixed precision, or (ZeRO-3) the values of every
  /// parameter in a unit bucket, by local name.
  Expected<std::map<std::string, at::Tensor>> gatherMasters();
  /// Sets this rank's ranges of parameter `local`'s master (mixed precision)
  /// or values (ZeRO-3) from the whole `value` (a checkpoint's).
  void loadMaster(const std::string &local, const at::Tensor &value);
  /// ZeRO-3: what this rank sends when bucket `b` is gathered: its range of
  /// the values, rounded to the parameters' dtype where the group carries it
  /// (else float32: round what arrives).
  at::Tensor gatherSource(size_t b) const;

private:
  struct BucketState {
    at::Tensor expAvg, expAvgSq, momentumBuffer; ///< S elements each, lazily
    at::Tensor master; ///< mixed precision: S float32 elements (padding zero);
                       ///< ZeRO-3 unit buckets: S values in the params' dtype
  };
  at::ScalarType stateDtype(size_t bucket) const;
  /// Bucket `bucket`'s states (momentum buffer, or Adam's moments), zeros, if
  /// not there yet.
  void allocate(size_t bucket, bool momentum);
  /// optimizer.foreach: true, or auto with the gradient shards on cuda.
  bool usesForeach() const;
  /// The update of every owned element from the gradient shards.
  void update(double lr);
  Status loadField(size_t param, const std::string &field, int64_t offset, const at::Tensor &v,
                   const std::string &key, const std::string &from);

  OptimizerConfig config_;
  Reducer &reducer_;
  std::vector<OptimParam> params_;
  std::vector<std::vector<int64_t>> shapes_; ///< of params_, kept after a release
  std::optional<at::ScalarType> masterDtype_; ///< the low dtype the masters round to
  std::map<std::string, size_t> index_;
  std::vector<at::Tensor> steps_; ///< per parameter, float32 scalars (undefined before a step)
  std::vector<BucketState> buckets_;
  bool momentumStarted_ = false;
};

/// The global gradient norm when some gradients are ZeRO shards: the plain
/// `params` count as clipGradNorm's world formula says (||g||^2 / replicas,
/// summed over ranks, / dp), every shard once; one float64 all-reduce over
/// `world` on `device` (the run's), no host synchronisation. Clips and
/// returns as clipGradNorm.
Expected<at::Tensor> clipGradNormSharded(const std::vector<at::Tensor> &params,
                                         const std::vector<int> &replicas,
                                         const std::vector<ZeroOptimizer *> &sharded,
                                         double maxNorm, CommBackend &world, int64_t dpSize,
                                         at::Device device);

} // namespace nnsc::rt
