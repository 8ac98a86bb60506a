// The training loop of one worker.
#include "nnsc/Runtime/Trainer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "EarlyStop.h"
#include "MemoryReport.h"
#include "PipelineRunner.h"
#include "TrainerImpl.h"
#include "TrainerLog.h"
#include "nnsc/Runtime/CheckpointStore.h"
#include "nnsc/Runtime/Collectives.h"
#include "nnsc/Runtime/Profiler.h"
#include "nnsc/Runtime/RngStreams.h"
#include "nnsc/Support/File.h"

namespace nnsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The mean over data-parallel copies and `count` micro-batches of the copies'
// losses, each the sum of its ranks' shares (`sum` is this rank's, summed
// over its micro-batches; ranks without a loss contribute 0).
Expected<double> averageOverCopies(TrainerState &s, const LossSum &sum, double count) {
  // On the group's device: NCCL reduces CUDA tensors only.
  std::vector<at::Tensor> bufs{sum.total(s.device)};
  Status st = s.comm->world().allReduce(bufs)->wait();
  if (!st.isOk())
    return st.withContext("averaging the loss over ranks");
  return bufs[0].cpu()[0].item<double>() /
         (count * double(std::max<int64_t>(1, s.layout.dpSize)));
}

// What a training step leaves on the device for its log record: this rank's
// loss shares summed over the micro-batches, and the gradient norm
// (undefined when fp16 skipped the step).
struct StepValues {
  at::Tensor lossSum;
  at::Tensor gradNorm;
};

// A step done and not yet read.
struct PendingStep {
  StepRecord record;
  StepValues values;
};

// Reads the pending steps' values into their records: each loss averaged
// over the copies and micro-batches, each gradient norm. One all-reduce and
// one host read for all of them, so a GPU runs the steps between two log
// lines without waiting for the host.
Status readStepValues(TrainerState &s, std::vector<PendingStep> &pending) {
  std::vector<at::Tensor> sums, norms;
  for (const PendingStep &p : pending) {
    sums.push_back(p.values.lossSum.to(s.device));
    if (p.values.gradNorm.defined())
      norms.push_back(p.values.gradNorm.to(s.device, at::kDouble).reshape({1}));
  }
  std::vector<at::Tensor> bufs{at::cat(sums)};
  Status st = s.comm->world().allReduce(bufs)->wait();
  if (!st.isOk())
    return st.withContext("averaging the loss over ranks");
  norms.insert(norms.begin(), bufs[0]);
  at::Tensor host = at::cat(norms).cpu();
  auto values = host.accessor<double, 1>();
  const double count = double(s.config.train.gradAccumulation) *
                       double(std::max<int64_t>(1, s.layout.dpSize));
  int64_t next = int64_t(pending.size());
  for (size_t i = 0; i < pending.size(); ++i) {
    StepRecord &r = pending[i].record;
    r.loss = values[int64_t(i)] / count;
    r.gradNorm = pending[i].values.gradNorm.defined() ? values[next++]
                                                      : std::numeric_limits<double>::quiet_NaN();
  }
  return Status::ok();
}

Status backward(TrainerState &s, const at::Tensor &loss) {
  at::Tensor scaled = lossForBackward(s, loss);
  if (!scaled.requires_grad())
    return errorf("rank{}.py: error: the loss does not depend on any trainable shard", s.env.rank);
  scaled.backward();
  return Status::ok();
}

template <typename F> Status forEachSync(TrainerState &s, F f) {
  for (auto &b : s.bufferSyncs)
    NNSC_RETURN_IF_ERROR(f(*b));
  return Status::ok();
}

// The global gradient norm (and clipping): from whole gradients, or under
// ZeRO from the reduced shards and the plain gradients. Left on the device.
Expected<at::Tensor> gradientNorm(TrainerState &s) {
  const double clip = s.config.optimizer.gradClip;
  if (!s.zero.empty()) {
    std::vector<ZeroOptimizer *> sharded;
    for (auto &z : s.zero)
      sharded.push_back(z.get());
    return clipGradNormSharded(s.plainTrainable, s.plainReplicas, sharded, clip, s.comm->world(),
                               s.layout.dpSize, s.device);
  }
  GradNormScope scope;
  scope.dpSize = s.layout.dpSize;
  scope.device = s.device;
  scope.foreach = s.optimizer->usesForeach();
  if (s.manifest.plan_ngpus() > 1)
    scope.world = &s.comm->world();
  return clipGradNorm(s.trainable, s.trainableReplicas, clip, scope);
}

// One optimizer step: every micro-batch forward and backward, the reducers,
// clipping, the update. Returns the loss averaged over micro-batches and ranks.
// A pipelined step: the schedule's passes, each parameter's reduction armed
// by the runner before the last backward that adds to its gradient (a
// chunk's last backward is not the rank's); then whatever is left.
Expected<LossSum> pipelineStep(TrainerState &s, int64_t step) {
  for (auto &r : s.reducers)
    r->prepare(false);
  auto lossSum = s.pipeline->train(s, step);
  if (!lossSum)
    return lossSum.status();
  for (auto &r : s.reducers)
    r->armAll();
  return lossSum;
}

// Every micro-batch's forward and backward in turn, the reducers armed for
// the last backward (they overlap it); under ZeRO-2 for every backward, each
// completed before the next forward (the gradients sum in the shards).
// Returns the sum of the loss shares.
Expected<LossSum> microBatchesStep(TrainerState &s, int64_t step) {
  const int64_t accum = s.config.train.gradAccumulation;
  LossSum lossSum;
  for (int64_t micro = 0; micro < accum; ++micro) {
    if (s.precision && micro > 0)
      s.precision->foldGrads(); // accumulate over micro-batches in float32
    for (auto &r : s.reducers)
      r->prepare(micro == accum - 1 || r->shardsGradients());
    NNSC_RETURN_IF_ERROR(syncBuffersBeforeForward(s));
    setRngForward(step * accum + micro);
    Expected<at::Tensor> loss = at::Tensor();
    {
      RECORD_USER_SCOPE("nnsc::forward");
      loss = forwardLoss(s, s.trainData->batch(s.layout, step, micro));
    }
    if (!loss)
      return loss.status();
    lossSum.add(s, *loss);
    {
      RECORD_USER_SCOPE("nnsc::backward");
      NNSC_RETURN_IF_ERROR(backward(s, *loss));
    }
    // After backward: batch_norm saved its running statistics for it, and
    // an in-place average before would fail autograd's version check.
    NNSC_RETURN_IF_ERROR(syncBuffersAfterForward(s));
    if (micro < accum - 1) // the last one's: trainStep, after the loop
      for (auto &r : s.reducers)
        if (r->shardsGradients())
          NNSC_RETURN_IF_ERROR(r->finish());
  }
  return lossSum;
}

void zeroGrads(TrainerState &s) {
  s.optimizer->zeroGrad();
  for (auto &z : s.zero)
    z->zeroGrad();
}

// Mixed precision after the reducers: every gradient in its float32 master;
// fp16 unscales them and says whether the step overflowed (then it is
// skipped, as GradScaler and Megatron skip it, and the scale drops).
Expected<bool> masterGradients(TrainerState &s) {
  if (!s.precision)
    return false;
  s.precision->foldGrads();
  std::vector<at::Tensor> shards; // ZeRO's reduced gradients
  for (const auto &r : s.reducers)
    if (r->scatters())
      for (size_t b = 0; b < r->numBuckets(); ++b)
        shards.push_back(r->gradShard(b));
  auto overflow = s.precision->unscale(s.comm->world(), s.device, shards);
  if (overflow && *overflow) {
    s.precision->updateScale(true);
    zeroGrads(s);
  }
  return overflow;
}

Expected<StepValues> trainStep(TrainerState &s, int64_t step, double lr, StepRecord &r) {
  auto t0 = Clock::now();
  takeCollectiveSeconds(); // the step's own from here
  auto lossSum = s.pipeline ? pipelineStep(s, step) : microBatchesStep(s, step);
  if (!lossSum)
    return lossSum.status();
  if (s.zero3) // no prefetch of values the step is about to change
    NNSC_RETURN_IF_ERROR(s.zero3->drain());
  double comm = takeCollectiveSeconds();
  auto t1 = Clock::now();
  {
    RECORD_USER_SCOPE("nnsc::grad_sync");
    for (auto &red : s.reducers)
      NNSC_RETURN_IF_ERROR(red->finish());
  }
  if (!s.device.is_cuda()) {
    r.fwdBwdSeconds = seconds(t0, t1);
    r.commSeconds = comm;
    r.gradSyncSeconds = seconds(t1, Clock::now());
  }
  if (s.precision && s.precision->scaler())
    r.lossScale = s.precision->lossScale(); // the scale this step's backward used
  StepValues values{lossSum->total(s.device), at::Tensor()};
  RECORD_USER_SCOPE("nnsc::optimizer"); // the masters, the norm, the update
  auto overflow = masterGradients(s);
  if (!overflow)
    return overflow.status();
  r.skipped = *overflow;
  if (r.skipped)
    return values;
  auto norm = gradientNorm(s);
  if (!norm)
    return norm.status();
  values.gradNorm = *norm;
  s.optimizer->step(lr);
  for (auto &z : s.zero)
    NNSC_RETURN_IF_ERROR(z->step(lr)); // and all-gathers the parameters
  zeroGrads(s);
  if (s.precision) {
    s.precision->copyMastersToShards();
    s.precision->updateScale(false);
  }
  return values;
}

Expected<double> validate(TrainerState &s) {
  RECORD_USER_SCOPE("nnsc::validation");
  at::NoGradGuard noGrad;
  LossSum sum;
  for (int64_t v = 0; v < s.config.train.valBatches; ++v) {
    if (s.pipeline) {
      NNSC_RETURN_IF_ERROR(s.pipeline->evaluate(s, v, sum));
      continue;
    }
    setRngForward(-1 - v);
    auto loss = forwardLoss(s, s.valData->valBatch(s.layout, v), Program::Mode::Eval);
    if (!loss)
      return loss.status();
    sum.add(s, *loss);
  }
  return averageOverCopies(s, sum, double(s.config.train.valBatches));
}

bool due(int64_t done, int64_t every, int64_t last) {
  return done == last || (every > 0 && done % every == 0);
}

class Loop {
public:
  /// `jobStart`: when the trainer began (train.time_limit_minutes counts
  /// from it: setup and a resume take the job's time too); `early`: its
  /// stop request, caught since then.
  Loop(TrainerState &s, std::ostream &out, Clock::time_point jobStart, const EarlyStop &early)
      : s_(s), out_(out), jobStart_(jobStart), early_(early) {}

  Status run() {
    const auto &t = s_.config.train;
    if (s_.isLogger())
      NNSC_RETURN_IF_ERROR(openMetrics());
    start_ = last_ = read_ = Clock::now();
    lastStep_ = s_.startStep;
    StepProfiler profiler(s_.config.profile, s_.env.rank,
                          s_.device.is_cuda() ? int(s_.device.index()) : -1);
    for (int64_t step = s_.startStep; step < t.steps; ++step) {
      StepRecord r;
      r.step = step + 1;
      r.steps = t.steps;
      r.lr = s_.schedule->at(step);
      profiler.beforeStep(r.step);
      r.profiled = s_.config.profile.coversStep(r.step); // on some rank: all are slowed
      stepStart_ = Clock::now(); // validation and checkpoints are not the step's
      Expected<StepValues> values = StepValues{};
      {
        RECORD_USER_SCOPE(fmt::format("nnsc::step#{}", r.step));
        values = trainStep(s_, step, r.lr, r);
      }
      if (!values)
        return values.status();
      profiler.afterStep(r.step); // validation and checkpoints stay out
      std::string stop;           // why every rank stops after this step ("" none)
      if (early_.enabled() && r.step < t.steps) {
        auto why = early_.agree(s_.comm->world(), s_.device, seconds(jobStart_, Clock::now()));
        if (!why)
          return why.status();
        stop = *why;
      }
      NNSC_RETURN_IF_ERROR(afterStep(r, *values, !stop.empty()));
      auto wrote = profiler.write(s_.isLogger() ? &out_ : nullptr);
      if (!wrote)
        return wrote.status();
      if (*wrote && pending_.empty())
        last_ = read_ = Clock::now(); // writing the profile is no step's time
      if (!stop.empty()) {
        // A scheduler that requeues the command must find it continuing, not starting over.
        const std::string &resume = s_.config.checkpoint.resume;
        if (s_.isLogger())
          out_ << fmt::format("nnsc-run: stopped after step {} of {} {}; its checkpoint is "
                              "saved: {}",
                              r.step, t.steps, stop,
                              resume == "auto"
                                  ? std::string("the same command resumes from it")
                                  : fmt::format("the same command would not resume from it "
                                                "(checkpoint.resume is {}): "
                                                "--checkpoint.resume=auto does",
                                                resume))
               << std::endl;
        return Status::ok();
      }
    }
    return Status::ok();
  }

private:
  // Times the step and keeps it pending. The pending steps are read, logged
  // and written to the metrics at a step that prints a line, validates,
  // saves a checkpoint (the metrics file then holds every step the
  // checkpoint has) or ends the run.
  // `stop`: every rank stops after this step, which is then read, logged and
  // checkpointed.
  Status afterStep(StepRecord &r, StepValues values, bool stop) {
    const TrainLoopConfig &t = s_.config.train;
    auto now = Clock::now();
    r.stepSeconds = seconds(stepStart_, now);
    if (r.fwdBwdSeconds)
      r.optimizerSeconds =
          std::max(0.0, r.stepSeconds - *r.fwdBwdSeconds - r.gradSyncSeconds.value_or(0));
    r.tokensPerS = tokensPerStep() / std::max(1e-9, r.stepSeconds);
    int64_t doneHere = r.step - s_.startStep;
    r.etaSeconds = seconds(start_, now) / double(doneHere) * double(r.steps - r.step);
    r.elapsedSeconds = seconds(start_, now);
    pending_.push_back({r, std::move(values)});
    const bool validation = s_.valData && t.valEvery > 0 && due(r.step, t.valEvery, r.steps);
    const CheckpointConfig &c = s_.config.checkpoint;
    const bool checkpoint = (c.every > 0 && r.step % c.every == 0) ||
                            (r.step == r.steps && c.saveLast == "true") || stop;
    if (!validation && !checkpoint && !logged(r.step) && !stop)
      return Status::ok();
    NNSC_RETURN_IF_ERROR(readPending());
    auto readAt = Clock::now(); // on cuda the steps' kernels are done only now
    bool best = false;
    if (validation) {
      auto v = validate(s_);
      if (!v)
        return v.status();
      // Every rank holds the same all-reduced value, so all agree on a new best.
      if (c.saveBest == "true" && std::isfinite(*v) && (!s_.best || *v < s_.best->valLoss)) {
        s_.best = CheckpointMeta::BestValidation{r.step, *v};
        best = true;
      }
      pending_.back().record.valLoss = *v;
      pending_.back().record.elapsedSeconds = seconds(start_, Clock::now());
    }
    if (s_.isLogger())
      for (const PendingStep &p : pending_)
        report(p.record, readAt);
    pending_.clear();
    Status st = Status::ok();
    // The best first: a step checkpoint records this step as the best, so it must not be
    // complete before checkpoints/best holds the step (a run killed in between resumes
    // from an earlier step and validates this one again).
    if (best) {
      RECORD_USER_SCOPE("nnsc::checkpoint");
      st = saveBestCheckpoint(s_, r.step, r.lr);
      if (st.isOk() && s_.isLogger())
        out_ << fmt::format("nnsc-run: val loss {:.4f} at step {} is the lowest so far: "
                            "checkpoint saved in {}",
                            s_.best->valLoss, r.step, bestCheckpointDir(s_.config.runDir))
             << std::endl;
    }
    if (checkpoint && st.isOk()) {
      RECORD_USER_SCOPE("nnsc::checkpoint");
      st = saveCheckpoint(s_, r.step, r.lr, best);
    }
    read_ = Clock::now();
    // Validation and checkpoints are not training: the next progress line's throughput
    // leaves their time out (last_ is at readAt or before it).
    last_ += read_ - readAt;
    return st;
  }

  // The pending steps' values, and on cuda their times: the host ran ahead
  // of the kernels, so each step gets the mean of the interval up to the read
  // (which waits for them), and the time left follows from that.
  Status readPending() {
    NNSC_RETURN_IF_ERROR(readStepValues(s_, pending_));
    if (!s_.device.is_cuda())
      return Status::ok();
    double each = seconds(read_, Clock::now()) / double(pending_.size());
    double elapsed = seconds(start_, read_);
    for (PendingStep &p : pending_) {
      p.record.stepSeconds = each;
      p.record.tokensPerS = tokensPerStep() / std::max(1e-9, each);
      p.record.elapsedSeconds = elapsed += each;
      double done = double(p.record.step - s_.startStep);
      p.record.etaSeconds = elapsed / done * double(p.record.steps - p.record.step);
    }
    return Status::ok();
  }

  bool logged(int64_t step) const {
    return due(step, s_.config.train.logEvery, s_.config.train.steps) ||
           step == s_.startStep + 1;
  }

  double tokensPerStep() const {
    return double(s_.config.train.globalBatchSize) * double(s_.blockSize);
  }

  void report(StepRecord r, Clock::time_point now) {
    if (logged(r.step)) {
      StepRecord shown = r; // throughput over the whole interval since the last line
      shown.tokensPerS =
          tokensPerStep() * double(r.step - lastStep_) / std::max(1e-9, seconds(last_, now));
      out_ << formatProgressLine(shown) << std::endl;
      last_ = now;
      lastStep_ = r.step;
    }
    if (r.valLoss)
      out_ << formatValidationLine(r) << std::endl;
    metrics_ << formatMetricsRecord(r) << '\n';
    metrics_.flush();
  }

  Status openMetrics() {
    const std::string &path = s_.config.metrics;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty())
      NNSC_RETURN_IF_ERROR(makeDirs(parent.string()));
    if (s_.startStep > 0)
      truncateMetrics(path, s_.startStep);
    metrics_.open(path, s_.startStep > 0 ? std::ios::app : std::ios::trunc);
    if (!metrics_)
      return errorf("{}: error: cannot write the metrics file", path);
    return Status::ok();
  }

  TrainerState &s_;
  std::ostream &out_;
  Clock::time_point jobStart_;
  const EarlyStop &early_;
  std::ofstream metrics_;
  std::vector<PendingStep> pending_;
  // start_: the loop's; last_: the last progress line's, moved on by the time
  // of the validations and checkpoints since; read_: the end of the last read
  // (and its validation and checkpoint).
  Clock::time_point start_, last_, read_, stepStart_ = Clock::now();
  int64_t lastStep_ = 0;
};

void printProfileBanner(const TrainerState &s, std::ostream &out) {
  const ProfileConfig &p = s.config.profile;
  if (!p.enabled())
    return;
  if (p.lastStep() <= s.startStep) {
    out << fmt::format("nnsc-run: profile: steps {}-{} were done before the resume at step {}; "
                       "nothing is profiled",
                       p.startStep, p.lastStep(), s.startStep)
        << std::endl;
    return;
  }
  std::string ranks =
      p.ranks.empty() ? "every rank" : fmt::format("rank {}", fmt::join(p.ranks, ", "));
  out << fmt::format("nnsc-run: profiling steps {}-{} on {} (LibTorch's profiler): "
                     "{}/rank<r>.pt.trace.json and rank<r>.summary.txt",
                     std::max(p.startStep, s.startStep + 1), p.lastStep(), ranks, p.dir)
      << std::endl;
}

void printBanner(const TrainerState &s, std::ostream &out) {
  int64_t params = 0;
  for (size_t i = 0; i < s.shards.size(); ++i)
    if (s.shardInfo[i].trainable)
      params += s.shards[i].numel();
  out << fmt::format("nnsc-run: {} ranks ({} data-parallel x {} per copy), model {}, {} "
                     "trainable elements on rank 0, {} backend",
                     s.env.worldSize, s.layout.dpSize,
                     s.manifest.plan_ngpus() > 0 ? s.manifest.plan_ngpus() : 1,
                     s.manifest.model_name().empty() ? "?" : s.manifest.model_name(),
                     withThousands(double(params)), s.comm->world().name())
      << std::endl;
  if (!s.zero.empty())
    out << fmt::format("nnsc-run: ZeRO-{}: the optimizer states{} of {} gradient reducer(s) are "
                       "sharded over their groups{}",
                       s.manifest.zero(), s.manifest.zero() >= 2 ? " and gradients" : "",
                       s.zero.size(),
                       s.manifest.zero_ngroups() > 1
                           ? fmt::format(" inside {} blocks of {} ranks (replicated over the "
                                         "blocks)",
                                         s.manifest.zero_ngroups(),
                                         s.env.worldSize / s.manifest.zero_ngroups())
                           : "")
        << std::endl;
  if (s.zero3)
    out << fmt::format("nnsc-run: ZeRO-3: the values of {} parameter bucket(s) ({} bytes whole) "
                       "are sharded too, gathered around each of {} recompute function(s) and "
                       "released after{}",
                       s.zero3->numBuckets(), withThousands(double(s.zero3->bucketBytes())),
                       s.zero3->numUnits(),
                       s.zero3->prefetch() ? "; each gather prefetches the next function's, and "
                                             "the forward's last stays whole "
                                             "for its re-run in backward"
                                           : "")
        << std::endl;
  if (s.config.precision.tf32 == "true")
    out << (s.device.is_cuda() ? "nnsc-run: TF32: float32 matmuls and convolutions may run on "
                                 "TF32 tensor cores (10-bit mantissa inputs, float32 sums)"
                               : "nnsc-run: precision.tf32 has no effect on cpu")
        << std::endl;
  if (s.config.precision.recipe == "autocast") // bf16 only (TrainerConfig.cpp)
    out << fmt::format("nnsc-run: mixed precision {} as torch.autocast: float32 weights, "
                       "gradients and optimizer states; the matmul family in {}, autocast's "
                       "float32 operators (norms, softmax, losses, ...) in float32",
                       s.config.precision.mode, s.config.precision.mode)
        << std::endl;
  if (s.precision) {
    const PrecisionConfig &p = s.config.precision;
    std::string scale =
        s.precision->scaler()
            ? fmt::format(", dynamic loss scale from {:g}", s.precision->lossScale())
            : "";
    out << fmt::format("nnsc-run: mixed precision {}: {} weights and activations, loss "
                       "operators in {}, float32 masters and optimizer states, gradients "
                       "reduced in {}{}",
                       p.mode, p.mode, p.lossDtype, p.gradReduceDtype, scale)
        << std::endl;
  }
  if (!s.resumedFrom.empty())
    out << fmt::format("nnsc-run: resumed from {} at step {}", s.resumedFrom, s.startStep)
        << std::endl;
  printProfileBanner(s, out);
}

// Rank 0 prints the optimizer-state bytes every rank holds (the tensors
// themselves, measured after training): one world all-reduce.
Status reportOptimizerBytes(TrainerState &s, std::ostream &out) {
  at::Tensor bytes = at::zeros({s.env.worldSize}, at::TensorOptions().dtype(at::kLong));
  bytes[s.env.rank] = optimizerStateBytes(s);
  std::vector<at::Tensor> bufs{bytes.to(s.device)}; // NCCL reduces device tensors only
  NNSC_RETURN_IF_ERROR(s.comm->world().allReduce(bufs)->wait());
  bytes = bufs[0].cpu();
  if (!s.isLogger())
    return Status::ok();
  std::vector<std::string> cells;
  for (int64_t r = 0; r < s.env.worldSize; ++r)
    cells.push_back(withThousands(double(bytes[r].item<int64_t>())));
  out << fmt::format("nnsc-run: optimizer-state bytes per rank: {}", fmt::join(cells, " | "))
      << std::endl;
  return Status::ok();
}

Status runTrainerUnchecked(const TrainerConfig &config, const LaunchEnv &env, std::ostream &out) {
  const Clock::time_point jobStart = Clock::now();
  // Caught from here to the end (setup, the loop, the reports and the last
  // barrier): a signal before the first step stops after it.
  EarlyStop early(config.checkpoint.onSignal, config.train.timeLimitMinutes);
  startMemoryMeasurement(config, config.device == "cuda" ? localCudaDevice(env) : 0);
  auto state = setupTrainer(config, env);
  if (!state)
    return state.status();
  TrainerState &s = **state;
  NNSC_RETURN_IF_ERROR(resumeTrainer(s));
  if (s.isLogger())
    printBanner(s, out);
  Status st = Loop(s, out, jobStart, early).run();
  if (st.isOk() && s.startStep < s.config.train.steps)
    st = reportOptimizerBytes(s, out);
  if (st.isOk() && s.startStep < s.config.train.steps)
    st = reportMemory(s, out);
  if (st.isOk() && s.zero3 && s.zero3->prefetch() && s.isLogger())
    out << fmt::format("nnsc-run: ZeRO-3 prefetch: {} of {} gathers found their all-gathers "
                       "launched by the function before, {} prefetches dropped; {} re-runs in "
                       "backward found their parameters kept whole since the forward",
                       s.zero3->prefetchesUsed(), s.zero3->gathers(), s.zero3->prefetchesDropped(),
                       s.zero3->keptUsed())
        << std::endl;
  if (st.isOk())
    st = s.comm->world().barrier()->wait(); // nobody leaves while others still talk
  return st;
}

} // namespace

void LossSum::add(const TrainerState &s, const at::Tensor &loss) {
  double scale = s.manifest.loss_scale() != 0 ? s.manifest.loss_scale() : 1.0;
  int replicas = std::max(1, s.manifest.loss_replicas());
  at::Tensor share = loss.detach().to(at::kDouble).reshape({1}) * scale / replicas;
  sum_ = sum_.defined() ? sum_ + share : share;
}

at::Tensor LossSum::total(at::Device device) const {
  if (sum_.defined())
    return sum_.to(device);
  return at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
}

at::Tensor lossForBackward(const TrainerState &s, const at::Tensor &loss) {
  at::Tensor scaled = loss;
  double scale = s.manifest.loss_scale();
  if (scale != 0 && scale != 1)
    scaled = scaled * scale;
  if (s.precision && s.precision->lossScale() != 1)
    scaled = scaled * s.precision->lossScale(); // fp16's dynamic scale
  if (s.config.train.gradAccumulation > 1)
    scaled = scaled / s.config.train.gradAccumulation;
  return scaled;
}

Status syncBuffersBeforeForward(TrainerState &s) {
  return forEachSync(s, [&](BufferSync &b) { return b.beforeForward(s.bufferPolicy); });
}

Status syncBuffersAfterForward(TrainerState &s) {
  return forEachSync(s, [&](BufferSync &b) { return b.afterForward(s.bufferPolicy); });
}

Status syncBuffersForCheckpoint(TrainerState &s) {
  return forEachSync(s, [](BufferSync &b) { return b.broadcast(); });
}

Status runTrainer(const TrainerConfig &config, const LaunchEnv &env, std::ostream &out) {
  try {
    Status st = runTrainerUnchecked(config, env, out);
    if (st.isOk() || st.message().find("error: ") != std::string::npos)
      return st;
    // Errors from communication carry no location; say who saw them.
    return Status::error(fmt::format("error: rank {}: {}", env.rank, st.message()), st.kind());
  } catch (const c10::Error &ex) {
    return Status::internal(
        fmt::format("error: rank {}: {}", env.rank, ex.what_without_backtrace()));
  } catch (const std::exception &ex) {
    return Status::internal(fmt::format("error: rank {}: {}", env.rank, ex.what()));
  }
}

} // namespace nnsc::rt
