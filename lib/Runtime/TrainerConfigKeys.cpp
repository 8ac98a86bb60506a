#include "TrainerConfigKeys.h"

namespace nnsc::rt {

namespace {

using C = TrainerConfig;

// Limits of counts read from a config, checked before anything is allocated
// or looped over: more threads than any machine has cores hangs the thread
// pool's start, and steps, batches or sizes past 2^31 are typos, not runs.
constexpr double kMaxThreads = 1024;
constexpr double kMaxCount = 2147483647;

KeySpec spec(const char *key, KeyType type, const char *def) {
  KeySpec s;
  s.key = key;
  s.type = type;
  s.def = def;
  return s;
}

KeySpec intKey(const char *key, const char *def, double min, std::function<int64_t &(C &)> ref,
               double max = 1e300) {
  KeySpec s = spec(key, KeyType::Int, def);
  s.min = min;
  s.max = max;
  s.intRef = std::move(ref);
  return s;
}

KeySpec floatKey(const char *key, const char *def, double min, std::function<double &(C &)> ref,
                 double max = 1e300) {
  KeySpec s = spec(key, KeyType::Float, def);
  s.min = min;
  s.max = max;
  s.floatRef = std::move(ref);
  return s;
}

KeySpec stringKey(const char *key, const char *def, std::function<std::string &(C &)> ref) {
  KeySpec s = spec(key, KeyType::String, def);
  s.strRef = std::move(ref);
  return s;
}

KeySpec choiceKey(const char *key, const char *def, std::vector<std::string> choices,
                  std::function<std::string &(C &)> ref) {
  KeySpec s = spec(key, KeyType::Choice, def);
  s.choices = std::move(choices);
  s.strRef = std::move(ref);
  return s;
}

std::vector<KeySpec> buildKeys() {
  std::vector<KeySpec> k;
  k.push_back(stringKey(
      "program", "", [](C & c) -> auto & { return c.program; }));
  k.push_back(stringKey(
      "run_dir", "run", [](C & c) -> auto & { return c.runDir; }));
  k.push_back(intKey(
      "seed", "0", 0, [](C & c) -> auto & { return c.seed; }));
  k.push_back(intKey(
      "threads", "0", 0, [](C & c) -> auto & { return c.threads; }, kMaxThreads));
  k.push_back(choiceKey(
      "device", "cpu", {"cpu", "cuda"}, [](C & c) -> auto & { return c.device; }));
  k.push_back(choiceKey(
      "backend", "auto", {"auto", "gloo", "nccl"}, [](C & c) -> auto & { return c.backend; }));
  k.push_back(choiceKey(
      "host_memory", "keep", {"keep", "return"},
      [](C & c) -> auto & { return c.hostMemory; }));
  k.push_back(choiceKey(
      "gloo_workers", "batch", {"batch", "normal"},
      [](C & c) -> auto & { return c.glooWorkers; }));
  k.push_back(choiceKey(
      "cpu_bind", "cores", {"cores", "none"}, [](C & c) -> auto & { return c.cpuBind; }));
  k.push_back(choiceKey(
      "omp_wait", "passive", {"passive", "active"}, [](C & c) -> auto & { return c.ompWait; }));
  k.push_back(floatKey(
      "comm_timeout_s", "120", 1e-3, [](C & c) -> auto & { return c.commTimeoutS; },
      86400)); // a day; far past it the milliseconds overflow
  k.push_back(choiceKey(
      "data.kind", "tokens", {"tokens", "synthetic", "tensors"},
      [](C & c) -> auto & { return c.data.kind; }));
  k.push_back(stringKey(
      "data.train", "", [](C & c) -> auto & { return c.data.train; }));
  k.push_back(stringKey(
      "data.val", "", [](C & c) -> auto & { return c.data.val; }));
  k.push_back(choiceKey(
      "data.dtype", "uint16", {"uint16", "int32"}, [](C & c) -> auto & { return c.data.dtype; }));
  k.push_back(intKey(
      "data.block_size", "0", 0, [](C & c) -> auto & { return c.data.blockSize; }, kMaxCount));
  k.push_back(intKey(
      "data.vocab_size", "0", 0, [](C & c) -> auto & { return c.data.vocabSize; }));
  k.push_back(intKey(
      "train.steps", "100", 1, [](C & c) -> auto & { return c.train.steps; }, kMaxCount));
  k.push_back(intKey(
      "train.micro_batch_size", "0", 0, [](C & c) -> auto & { return c.train.microBatchSize; },
      kMaxCount));
  k.push_back(intKey(
      "train.grad_accumulation", "1", 1, [](C & c) -> auto & { return c.train.gradAccumulation; },
      kMaxCount));
  k.push_back(intKey(
      "train.global_batch_size", "0", 0, [](C & c) -> auto & { return c.train.globalBatchSize; },
      kMaxCount));
  k.push_back(intKey(
      "train.log_every", "10", 1, [](C & c) -> auto & { return c.train.logEvery; }));
  k.push_back(intKey(
      "train.val_every", "0", 0, [](C & c) -> auto & { return c.train.valEvery; }));
  k.push_back(intKey(
      "train.val_batches", "20", 1, [](C & c) -> auto & { return c.train.valBatches; }, kMaxCount));
  k.push_back(floatKey(
      "train.time_limit_minutes", "0", 0,
      [](C & c) -> auto & { return c.train.timeLimitMinutes; }));
  k.push_back(choiceKey(
      "optimizer.name", "adamw", {"adamw", "adam", "sgd"},
      [](C & c) -> auto & { return c.optimizer.name; }));
  k.push_back(floatKey(
      "optimizer.lr", "1e-3", 0, [](C & c) -> auto & { return c.optimizer.lr; }));
  KeySpec betas = spec("optimizer.betas", KeyType::FloatPair, "[0.9, 0.999]");
  betas.setPair = [](C &c, double b1, double b2) {
    c.optimizer.beta1 = b1;
    c.optimizer.beta2 = b2;
  };
  k.push_back(betas);
  k.push_back(floatKey(
      "optimizer.eps", "1e-8", 0, [](C & c) -> auto & { return c.optimizer.eps; }));
  k.push_back(floatKey(
      "optimizer.weight_decay", "0.0", 0, [](C & c) -> auto & { return c.optimizer.weightDecay; }));
  k.push_back(floatKey(
      "optimizer.momentum", "0.0", 0, [](C & c) -> auto & { return c.optimizer.momentum; }));
  k.push_back(floatKey(
      "optimizer.grad_clip", "0.0", 0, [](C & c) -> auto & { return c.optimizer.gradClip; }));
  k.push_back(choiceKey(
      "optimizer.foreach", "auto", {"auto", "true", "false"},
      [](C & c) -> auto & { return c.optimizer.foreach; }));
  k.push_back(choiceKey(
      "optimizer.fused", "false", {"true", "false"},
      [](C & c) -> auto & { return c.optimizer.fused; }));
  k.push_back(choiceKey(
      "lr_schedule.name", "constant", {"constant", "cosine"},
      [](C & c) -> auto & { return c.lrSchedule.name; }));
  k.push_back(intKey(
      "lr_schedule.warmup_steps", "0", 0,
      [](C & c) -> auto & { return c.lrSchedule.warmupSteps; }));
  k.push_back(intKey(
      "lr_schedule.decay_steps", "0", 0, [](C & c) -> auto & { return c.lrSchedule.decaySteps; }));
  k.push_back(floatKey(
      "lr_schedule.min_lr", "0.0", 0, [](C & c) -> auto & { return c.lrSchedule.minLr; }));
  k.push_back(intKey(
      "checkpoint.every", "0", 0, [](C & c) -> auto & { return c.checkpoint.every; }));
  k.push_back(choiceKey(
      "checkpoint.save_last", "true", {"true", "false"},
      [](C & c) -> auto & { return c.checkpoint.saveLast; }));
  k.push_back(choiceKey(
      "checkpoint.save_best", "false", {"true", "false"},
      [](C & c) -> auto & { return c.checkpoint.saveBest; }));
  k.push_back(intKey(
      "checkpoint.keep_last", "3", 0, [](C & c) -> auto & { return c.checkpoint.keepLast; }));
  k.push_back(stringKey(
      "checkpoint.resume", "auto", [](C & c) -> auto & { return c.checkpoint.resume; }));
  k.push_back(choiceKey(
      "checkpoint.on_signal", "none", {"none", "SIGTERM", "SIGINT", "SIGUSR1", "SIGUSR2"},
      [](C & c) -> auto & { return c.checkpoint.onSignal; }));
  k.push_back(choiceKey(
      "data_parallel.buffers", "broadcast", {"broadcast", "average"},
      [](C & c) -> auto & { return c.dataParallel.buffers; }));
  k.push_back(choiceKey(
      "data_parallel.bucket_view", "true", {"true", "false"},
      [](C & c) -> auto & { return c.dataParallel.bucketView; }));
  k.push_back(choiceKey(
      "data_parallel.zero3_prefetch", "true", {"true", "false"},
      [](C & c) -> auto & { return c.dataParallel.zero3Prefetch; }));
  k.push_back(choiceKey(
      "precision.mode", "fp32", {"fp32", "bf16", "fp16"},
      [](C & c) -> auto & { return c.precision.mode; }));
  k.push_back(choiceKey(
      "precision.recipe", "megatron", {"megatron", "autocast"},
      [](C & c) -> auto & { return c.precision.recipe; }));
  k.push_back(choiceKey(
      "precision.grad_reduce_dtype", "fp32", {"fp32", "bf16", "fp16"},
      [](C & c) -> auto & { return c.precision.gradReduceDtype; }));
  k.push_back(choiceKey(
      "precision.loss_dtype", "fp32", {"fp32", "bf16", "fp16"},
      [](C & c) -> auto & { return c.precision.lossDtype; }));
  k.push_back(choiceKey(
      "precision.tf32", "false", {"false", "true"},
      [](C & c) -> auto & { return c.precision.tf32; }));
  k.push_back(floatKey(
      "precision.loss_scale.initial", "65536", 1e-30,
      [](C & c) -> auto & { return c.precision.lossScale.initial; }));
  k.push_back(floatKey(
      "precision.loss_scale.growth_factor", "2.0", 1,
      [](C & c) -> auto & { return c.precision.lossScale.growthFactor; }));
  k.push_back(floatKey(
      "precision.loss_scale.backoff_factor", "0.5", 1e-30,
      [](C & c) -> auto & { return c.precision.lossScale.backoffFactor; }));
  k.push_back(intKey(
      "precision.loss_scale.growth_interval", "1000", 1,
      [](C & c) -> auto & { return c.precision.lossScale.growthInterval; }, kMaxCount));
  k.push_back(floatKey(
      "precision.loss_scale.min", "1.0", 1e-30,
      [](C & c) -> auto & { return c.precision.lossScale.minScale; }));
  k.push_back(intKey(
      "precision.loss_scale.hysteresis", "1", 1,
      [](C & c) -> auto & { return c.precision.lossScale.hysteresis; }, kMaxCount));
  k.push_back(intKey(
      "profile.start_step", "0", 0, [](C & c) -> auto & { return c.profile.startStep; },
      kMaxCount));
  k.push_back(intKey(
      "profile.end_step", "0", 0, [](C & c) -> auto & { return c.profile.endStep; }, kMaxCount));
  KeySpec ranks = spec("profile.ranks", KeyType::RankList, "[0]");
  ranks.ranksRef = [](C & c) -> auto & { return c.profile.ranks; };
  k.push_back(ranks);
  k.push_back(stringKey(
      "profile.dir", "${run_dir}/profile", [](C & c) -> auto & { return c.profile.dir; }));
  k.push_back(choiceKey(
      "profile.record_shapes", "false", {"false", "true"},
      [](C & c) -> auto & { return c.profile.recordShapes; }));
  k.push_back(choiceKey(
      "profile.memory", "false", {"false", "true"},
      [](C & c) -> auto & { return c.profile.memory; }));
  k.push_back(intKey(
      "profile.top", "15", 0, [](C & c) -> auto & { return c.profile.top; }, kMaxCount));
  k.push_back(choiceKey(
      "report_memory", "true", {"true", "false"},
      [](C & c) -> auto & { return c.reportMemory; }));
  k.push_back(stringKey(
      "metrics", "${run_dir}/metrics.jsonl", [](C & c) -> auto & { return c.metrics; }));
  return k;
}

} // namespace

const std::vector<KeySpec> &trainerConfigKeys() {
  static const std::vector<KeySpec> keys = buildKeys();
  return keys;
}

} // namespace nnsc::rt
