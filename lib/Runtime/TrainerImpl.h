#pragma once
// The state of one trainer worker, shared by TrainerSetup.cpp (building it)
// and Trainer.cpp (the loop). Private to the runtime.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "nnsc/Runtime/BufferSync.h"
#include "nnsc/Runtime/CheckpointMeta.h"
#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/Dataset.h"
#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Runtime/LrSchedule.h"
#include "nnsc/Runtime/MixedPrecision.h"
#include "nnsc/Runtime/Optimizer.h"
#include "nnsc/Runtime/Program.h"
#include "nnsc/Runtime/Reducer.h"
#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/Runtime/Zero3.h"
#include "nnsc/Runtime/ZeroOptimizer.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

class PipelineRunner;

/// What feeds one program argument: a shard, a data field, or the device
/// (an argument named `device`, where the program creates tensors).
struct ArgBinding {
  int shard = -1; ///< index into TrainerState::shards
  int input = -1; ///< index of the manifest input (tokens: 0 = x, 1 = y)
  bool device = false;
};

/// The data a split (train or validation) feeds the program's inputs.
class DataFeed {
public:
  virtual ~DataFeed() = default;

  /// Micro-batch `micro` of step `step` for the rank in `layout`: one CPU
  /// tensor per fed input, in manifest input order, of the input's dtype.
  virtual std::vector<at::Tensor> batch(const SampleLayout &layout, int64_t step,
                                        int64_t micro) const = 0;

  /// Validation batch `v`: the same samples as step v with accumulation 1.
  std::vector<at::Tensor> valBatch(const SampleLayout &layout, int64_t v) const {
    SampleLayout single = layout;
    single.gradAccumulation = 1;
    return batch(single, v, 0);
  }
};

struct TrainerState {
  TrainerConfig config;
  LaunchEnv env;
  proto::RankManifest manifest;
  std::string programDir;
  std::vector<ShardInfo> shardInfo;
  std::vector<at::Tensor> shards; ///< leaves, same order as shardInfo
  std::optional<Program> program;
  std::vector<ArgBinding> args;
  std::vector<at::ScalarType> inputTypes; ///< of the fed inputs, manifest order
  std::unique_ptr<CommWorld> comm;
  std::vector<std::unique_ptr<Reducer>> reducers;
  std::vector<std::unique_ptr<BufferSync>> bufferSyncs; ///< ascending group ids
  BufferPolicy bufferPolicy = BufferPolicy::Broadcast;
  std::unique_ptr<Optimizer> optimizer; ///< the shards no ZeRO optimizer holds
  /// ZeRO-1: one per reducer whose buckets are reduce-scattered (manifest
  /// zero >= 1 and a group of more than one rank), in reducer order.
  std::vector<std::unique_ptr<ZeroOptimizer>> zero;
  /// ZeRO-3 (manifest zero 3): the unit buckets of `zero`'s reducers, their
  /// parameters whole only while their recompute function runs; null
  /// otherwise. Destroyed before the optimizers and reducers it points to.
  std::unique_ptr<Zero3Params> zero3;
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<DataFeed> trainData, valData; ///< valData may be null
  SampleLayout layout;
  at::Device device{at::kCPU};
  int64_t blockSize = 0;   ///< T of token data; 1 for tensor data (throughput counts samples)
  int64_t startStep = 0;   ///< steps already done (resume)
  std::string resumedFrom; ///< checkpoint directory, if any
  /// checkpoint.save_best: the lowest validation loss so far (a resume restores it).
  std::optional<CheckpointMeta::BestValidation> best;
  std::vector<at::Tensor> trainable;
  std::vector<int> trainableReplicas;
  /// The trainable shards the plain optimizer holds, and their replicas.
  std::vector<at::Tensor> plainTrainable;
  std::vector<int> plainReplicas;
  /// Pipelined programs (manifest pipeline): runs the schedule in place of
  /// the single forward and backward.
  std::shared_ptr<PipelineRunner> pipeline;
  /// precision.mode bf16 | fp16: float32 masters beside the low shards
  /// (`shards` are then low-precision; `trainable` and `plainTrainable` the
  /// masters); null under fp32.
  std::unique_ptr<MixedPrecision> precision;

  bool isLogger() const { return env.rank == 0; }
};

/// The CUDA device of a worker: cuda:LOCAL_RANK, or cuda:0 when the process
/// sees one GPU only through a CUDA_VISIBLE_DEVICES of its own (a
/// scheduler's per-task binding). setupTrainer checks that it exists.
int localCudaDevice(const LaunchEnv &env);

/// Builds the worker: manifest, shards, program, comm world, reducers,
/// optimizer, data; seeds and sets threads.
Expected<std::unique_ptr<TrainerState>> setupTrainer(const TrainerConfig &config,
                                                     const LaunchEnv &env);

/// Restores the newest complete checkpoint (per checkpoint.resume), if any.
Status resumeTrainer(TrainerState &s);

/// Writes checkpoint step-<step> (all ranks; rank 0 marks it complete and
/// prunes old ones). `afterBest`: checkpoints/best was just written for this step, and the
/// step checkpoint takes its files (hard links) instead of writing the state again.
Status saveCheckpoint(TrainerState &s, int64_t step, double lr, bool afterBest = false);
/// checkpoint.save_best: a checkpoint of `step` in RUN_DIR/checkpoints/best, replacing the one
/// there only once it is complete.
Status saveBestCheckpoint(TrainerState &s, int64_t step, double lr);

/// The optimizer states of every shard (plain and ZeRO), keyed as
/// Optimizer::state() and ZeroOptimizer::state().
std::map<std::string, at::Tensor> optimizerState(const TrainerState &s);
/// Restores them, each key to the optimizer holding its shard.
Status loadOptimizerState(TrainerState &s, const std::map<std::string, at::Tensor> &state,
                          const std::string &from);
/// Bytes of optimizer states this rank holds (plain and ZeRO).
int64_t optimizerStateBytes(const TrainerState &s);

/// Resumes from a merged checkpoint (nnsc-merge-ckpt's FILE.pt and its
/// FILE.optim.pt): slices every tensor into this rank's shards and
/// optimizer states, checking all of them before anything is overwritten.
Status resumeFromMerged(TrainerState &s, const std::string &path);

/// How many manifest inputs the data feeds: all for data.kind 'tensors', the
/// first two (x, y) for token data.
int fedInputCount(const TrainerState &s);

/// Reads B (and T for token data) from the manifest inputs, checks them
/// against the config and sets the sample layout and input dtypes.
Status checkShapes(TrainerState &s);

/// Opens the train (and validation) data of data.kind; after checkShapes.
Status openData(TrainerState &s);

/// Buffer syncs of every group before / after a forward (per
/// data_parallel.buffers), and before a checkpoint (a broadcast from copy 0,
/// so that the copies' replicas agree and merge).
Status syncBuffersBeforeForward(TrainerState &s);
Status syncBuffersAfterForward(TrainerState &s);
Status syncBuffersForCheckpoint(TrainerState &s);

/// The sum of this rank's loss shares over a step's micro-batches, kept on the
/// device (float64): adding one does not wait for the device; the step reads
/// the total once, after averaging it over the ranks. A loss replicated over
/// several ranks of the copy counts once, a partial loss (the manifest's
/// loss_scale) as its share.
class LossSum {
public:
  void add(const TrainerState &s, const at::Tensor &loss);
  /// The sum (a float64 [1] tensor on `device`; zero when nothing was added).
  at::Tensor total(at::Device device) const;

private:
  at::Tensor sum_;
};

/// What backward starts from for one micro-batch: the loss times the
/// manifest's loss_scale, divided by the gradient accumulation (as `loss /
/// accum` in Python).
at::Tensor lossForBackward(const TrainerState &s, const at::Tensor &loss);

/// Shard `i` as optimizers and checkpoints see it: its float32 master under
/// mixed precision (or the shard in its original dtype), else the shard.
/// Undefined for a master a ZeRO optimizer shards (shardValues has it).
at::Tensor shardValue(const TrainerState &s, size_t i);
/// The dtype of shardValue(s, i).
at::ScalarType shardDtype(const TrainerState &s, size_t i);
/// shardValue of every shard, the masters ZeRO shards gathered whole (every
/// rank of their groups calls it together): what a checkpoint holds.
Expected<std::vector<at::Tensor>> shardValues(TrainerState &s);
/// Sets shard `i` (and its master, or this rank's ranges of it under ZeRO)
/// to `value`, without recording grad.
void setShardValue(TrainerState &s, size_t i, const at::Tensor &value);

/// A fed input as the program takes it: on the device, floating inputs in
/// the mixed-precision compute dtype.
at::Tensor programInput(const TrainerState &s, const at::Tensor &input);

/// Runs the program on one batch (DataFeed::batch's tensors); returns the
/// loss output.
Expected<at::Tensor> forwardLoss(TrainerState &s, const std::vector<at::Tensor> &inputs,
                                 Program::Mode mode = Program::Mode::Train);

} // namespace nnsc::rt
