#pragma once
/// The trainer configuration of nnsc-run: a YAML file plus `--key.path=value`
/// command-line overrides, with `${other.key}` and `${env:VAR}` interpolation.
/// Every key is typed and has a default (docs/trainer-config.md lists them);
/// unknown or ill-typed keys are errors with file:line:col. This header and
/// its implementation do not include LibTorch.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

struct DataConfig {
  std::string kind = "tokens";  ///< tokens | tensors | synthetic
  std::string train;            ///< token or tensor file (required unless synthetic)
  std::string val;              ///< token file for validation; empty = none
  std::string dtype = "uint16"; ///< uint16 | int32
  int64_t blockSize = 0;        ///< 0 = from the program's input shape
  int64_t vocabSize = 0;        ///< synthetic tokens are drawn from [0, vocabSize)
};

struct TrainLoopConfig {
  int64_t steps = 100;
  int64_t microBatchSize = 0; ///< per rank; 0 = from the program's input shape
  int64_t gradAccumulation = 1;
  int64_t globalBatchSize = 0; ///< 0 = micro × dp × accumulation, else checked
  int64_t logEvery = 10;
  int64_t valEvery = 0; ///< 0 = no validation
  int64_t valBatches = 20;
  /// Stop with a checkpoint once rank 0's trainer has run this long, setup
  /// and resume included (0 = no limit), as Megatron's --exit-duration-in-mins.
  double timeLimitMinutes = 0;
};

struct OptimizerConfig {
  std::string name = "adamw"; ///< adamw | adam | sgd
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0;
  double gradClip = 0.0; ///< max global L2 norm; 0 = no clipping
  /// auto | true | false: one multi-tensor (_foreach) update per device,
  /// dtype and decay group, as torch.optim's foreach=True; auto takes it
  /// for parameters on cuda, as PyTorch's default does.
  std::string foreach = "auto";
  /// true | false: PyTorch's fused kernels (torch.optim's fused=True,
  /// LibTorch 2.4+ on cpu and cuda): one kernel per group does the whole
  /// update, reading each tensor once. Not with foreach true.
  std::string fused = "false";
};

struct LrScheduleConfig {
  std::string name = "constant"; ///< constant | cosine
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0; ///< 0 = train.steps
  double minLr = 0.0;
};

struct CheckpointConfig {
  int64_t every = 0;           ///< 0 = only at the end
  /// true | false: a checkpoint after the last step (nnScaler's save_last);
  /// false for runs whose end state nobody needs (benchmarks).
  std::string saveLast = "true";
  /// true | false: after a validation whose loss is the lowest so far, a
  /// checkpoint in RUN_DIR/checkpoints/best (nnScaler's save_best; nanoGPT's
  /// always_save_checkpoint = False).
  std::string saveBest = "false";
  int64_t keepLast = 3;        ///< 0 = keep all
  std::string resume = "auto"; ///< auto | never | a checkpoint directory
  /// none | SIGTERM | SIGINT | SIGUSR1 | SIGUSR2: on this signal (to any
  /// rank) every rank ends the step it is in, saves a checkpoint and exits,
  /// as Megatron's --exit-signal-handler.
  std::string onSignal = "none";
};

struct DataParallelConfig {
  /// How copies keep the buffers the forward writes equal: broadcast (copy
  /// 0's before every forward, as PyTorch DDP) | average (after every forward).
  std::string buffers = "broadcast";
  /// true: the gradients are views of the reducers' buckets (Reducer.h), so
  /// they are neither copied in and out nor held twice | false: copies.
  std::string bucketView = "true";
  /// ZeRO-3 (docs/zero.md): true: each recompute group's gather launches
  /// the next group's all-gathers, which run while this group computes (two
  /// groups whole at once) | false: each gather waited for when its group
  /// starts.
  std::string zero3Prefetch = "true";
};

/// Dynamic loss scaling of fp16 training (PyTorch's GradScaler and
/// Megatron's DynamicGradScaler): the loss is multiplied by `scale` before
/// backward; a step whose gradients hold an inf or NaN on any rank is skipped
/// and, after `hysteresis` such steps in a row, the scale is multiplied by
/// `backoffFactor` (never below `minScale`); after `growthInterval` steps
/// without one it is multiplied by `growthFactor`.
struct LossScaleConfig {
  double initial = 65536;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 1000;
  double minScale = 1.0;
  int64_t hysteresis = 1;
};

/// Mixed precision (docs/trainer-config.md). Recipe megatron: weights,
/// activations and gradients in `mode`'s dtype; float32 master weights and
/// optimizer states; gradients accumulated over micro-batches and reduced in
/// `gradReduceDtype`. Recipe autocast: float32 weights, gradients and
/// optimizer states; the matmul family in `mode`'s dtype and autocast's
/// float32 operators in float32, as torch.autocast.
struct PrecisionConfig {
  std::string mode = "fp32";            ///< fp32 | bf16 | fp16
  std::string recipe = "megatron";      ///< megatron | autocast (bf16 only)
  std::string gradReduceDtype = "fp32"; ///< fp32 | bf16 | fp16 (the mode's dtype)
  std::string lossDtype = "fp32";       ///< loss operators: fp32 | the mode's dtype
  LossScaleConfig lossScale;            ///< fp16 only
  /// true | false: float32 matmuls and convolutions on CUDA may use TF32
  /// tensor cores (torch.backends.cuda.matmul.allow_tf32 and
  /// torch.backends.cudnn.allow_tf32); false keeps LibTorch's defaults.
  std::string tf32 = "false";
};

/// LibTorch's profiler over a range of steps (docs/trainer-config.md,
/// "Profiling"): a Chrome trace per profiled rank and a table of where the
/// time went.
struct ProfileConfig {
  int64_t startStep = 0;              ///< first profiled step (1-based); 0 = no profiling
  int64_t endStep = 0;                ///< last profiled step, inclusive; 0 = startStep
  std::vector<int64_t> ranks;         ///< global ranks that profile; empty = every rank
  std::string dir;                    ///< default ${run_dir}/profile
  std::string recordShapes = "false"; ///< true | false: operators' input shapes
  std::string memory = "false";       ///< true | false: allocations and frees
  int64_t top = 15;                   ///< rows of each summary table

  bool enabled() const { return startStep > 0; }
  int64_t lastStep() const { return endStep > 0 ? endStep : startStep; }
  bool profilesRank(int64_t rank) const;
  /// True for a step (1-based) in [startStep, lastStep()] while enabled.
  bool coversStep(int64_t step) const {
    return enabled() && step >= startStep && step <= lastStep();
  }
};

/// The typed configuration. `positions` says where each key got its value
/// (file:line:col, or the command-line option), for later error messages.
struct TrainerConfig {
  std::string program;
  std::string runDir = "run";
  int64_t seed = 0;
  int64_t threads = 0;          ///< intra-op threads; 0 = cores / local workers
  std::string device = "cpu";   ///< cpu | cuda
  std::string backend = "auto"; ///< auto | gloo | nccl
  std::string hostMemory = "keep"; ///< keep | return (HostMemory.h)
  std::string glooWorkers = "batch"; ///< batch | normal (CommOptions::glooBatchWorkers)
  std::string cpuBind = "cores";     ///< cores | none (CpuBinding.h)
  /// passive | active: how idle OpenMP threads wait (OMP_WAIT_POLICY of the
  /// workers; passive unless the environment sets a policy: RunCommand.h).
  std::string ompWait = "passive";
  double commTimeoutS = 120;
  DataConfig data;
  TrainLoopConfig train;
  OptimizerConfig optimizer;
  LrScheduleConfig lrSchedule;
  CheckpointConfig checkpoint;
  DataParallelConfig dataParallel;
  PrecisionConfig precision;
  ProfileConfig profile;
  std::string metrics; ///< default ${run_dir}/metrics.jsonl
  /// "true": count live CPU tensor storage and print its peak beside the
  /// plan's estimate at the end (device cpu); "false": no counting.
  std::string reportMemory = "true";

  std::string path;                            ///< the YAML file
  std::map<std::string, SourcePos> positions;  ///< key path → where it was set
  std::map<std::string, std::string> resolved; ///< key path → final text

  /// Where `key` was set; the config file without a line when defaulted.
  SourcePos positionOf(const std::string &key) const;
};

/// Parses config `text` (named `path` in messages), applies `overrides`
/// ("--train.steps=20" or "train.steps=20"), interpolates and types it.
Expected<TrainerConfig> parseTrainerConfig(const std::string &text, const std::string &path,
                                           const std::vector<std::string> &overrides,
                                           const EnvLookup &env);

/// Reads `path` and parses it with the process environment.
Expected<TrainerConfig> loadTrainerConfig(const std::string &path,
                                          const std::vector<std::string> &overrides);

/// Checks train.global_batch_size against micro × dp × accumulation (when
/// set) and fills it in otherwise; the error names all three numbers.
Status checkBatchSizes(TrainerConfig &config, int64_t dpSize);

/// Every key with its resolved value, one "key: value" line each, sorted.
std::string describeConfig(const TrainerConfig &config);

/// A hash of the keys that change the training math (model program, data,
/// batch sizes, optimizer, schedule, seed); stored in checkpoints.
std::string configHash(const TrainerConfig &config);

} // namespace nnsc::rt
