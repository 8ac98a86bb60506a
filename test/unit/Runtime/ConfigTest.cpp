// Trainer config: defaults, overrides, interpolation, typed errors with
// positions, and the batch-size check.
#include "../CatchCompat.h"

#include <cstdlib>

#include "nnsc/Runtime/RunCommand.h"
#include "nnsc/Runtime/TrainerConfig.h"

using namespace nnsc;
using namespace nnsc::rt;

namespace {

EnvLookup fakeEnv() {
  return [](const std::string &name) -> std::optional<std::string> {
    if (name == "DATA_ROOT")
      return std::string("/data");
    return std::nullopt;
  };
}

Expected<TrainerConfig> parse(const std::string &text, std::vector<std::string> overrides = {}) {
  return parseTrainerConfig(text, "cfg.yaml", overrides, fakeEnv());
}

const char *kBase = "program: out/gpt\n"
                    "run_dir: runs/a\n"
                    "data:\n"
                    "  train: ${env:DATA_ROOT}/train.bin\n"
                    "  val: ${data.train}.val\n"
                    "train:\n"
                    "  steps: 20\n"
                    "  micro_batch_size: 4\n"
                    "optimizer:\n"
                    "  lr: 6e-4\n"
                    "  betas: [0.9, 0.95]\n";

} // namespace

TEST_CASE("config: defaults and typed values", "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(c->program == "out/gpt");
  CHECK(c->train.steps == 20);
  CHECK(c->train.gradAccumulation == 1);
  CHECK(c->optimizer.name == "adamw");
  CHECK(c->optimizer.lr == 6e-4);
  CHECK(c->optimizer.beta1 == 0.9);
  CHECK(c->optimizer.beta2 == 0.95);
  CHECK(c->optimizer.eps == 1e-8);
  CHECK(c->checkpoint.resume == "auto");
  CHECK(c->checkpoint.keepLast == 3);
  CHECK(c->commTimeoutS == 120);
}

TEST_CASE("config: interpolation of keys, env and defaults", "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(c->data.train == "/data/train.bin");
  CHECK(c->data.val == "/data/train.bin.val");
  CHECK(c->metrics == "runs/a/metrics.jsonl"); // default "${run_dir}/metrics.jsonl"
}

TEST_CASE("config: command-line overrides win and are interpolated", "[runtime][config]") {
  auto c = parse(kBase, {"--train.steps=7", "--run_dir=runs/b", "--optimizer.betas=[0.8, 0.9]",
                         "--lr_schedule.name=cosine"});
  REQUIRE(c.isOk());
  CHECK(c->train.steps == 7);
  CHECK(c->metrics == "runs/b/metrics.jsonl");
  CHECK(c->optimizer.beta1 == 0.8);
  CHECK(c->lrSchedule.name == "cosine");
}

TEST_CASE("config: unknown key names its position and the accepted keys", "[runtime][config]") {
  auto c = parse(std::string(kBase) + "  stepz: 3\n");
  REQUIRE(!c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::Matchers::StartsWith(
                 "cfg.yaml:12:3: error: unknown key 'stepz' in section 'optimizer'; "
                 "expected one of: name, lr, betas, eps, weight_decay, momentum, "
                 "grad_clip"));
  CHECK_THAT(c.status().message(), Catch::Matchers::ContainsSubstring("  stepz: 3\n    ^"));
}

TEST_CASE("config: unknown top-level key and section", "[runtime][config]") {
  auto c = parse("program: p\nprogam: q\n");
  REQUIRE(!c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::Matchers::StartsWith(
                 "cfg.yaml:2:1: error: unknown key 'progam'; expected one of: "
                 "program, run_dir, seed, threads, device, backend, host_memory, gloo_workers, "
                 "cpu_bind, omp_wait, comm_timeout_s, "
                 "data, train, optimizer, lr_schedule, checkpoint, data_parallel, precision, "
                 "profile, report_memory, metrics"));
  auto s = parse("program: p\nmodel:\n  dim: 3\n");
  REQUIRE(!s.isOk());
  CHECK_THAT(s.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:3:3: error: unknown section 'model'"));
}

TEST_CASE("config: unknown override key", "[runtime][config]") {
  auto c = parse(kBase, {"--train.stepz=3"});
  REQUIRE(!c.isOk());
  CHECK_THAT(
      c.status().message(),
      Catch::Matchers::StartsWith("command line: error: unknown key 'stepz' in section 'train'"));
  CHECK_THAT(c.status().message(), Catch::Matchers::ContainsSubstring("(in '--train.stepz=3')"));
}

TEST_CASE("config: mistyped values", "[runtime][config]") {
  auto c = parse(std::string(kBase) + "  eps: tiny\n");
  REQUIRE(!c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::Matchers::StartsWith(
                 "cfg.yaml:12:3: error: 'optimizer.eps' must be a number >= 0, got 'tiny'"));
  auto d = parse(kBase, {"--optimizer.name=lamb"});
  REQUIRE(!d.isOk());
  CHECK_THAT(d.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "'optimizer.name' must be one of: adamw, adam, sgd, got 'lamb'"));
  auto e = parse(kBase, {"--train.steps=2.5"});
  REQUIRE(!e.isOk());
  CHECK_THAT(e.status().message(), Catch::Matchers::ContainsSubstring(
                                       "'train.steps' must be an integer from 1 to 2147483647"));
  auto f = parse(kBase, {"--optimizer.betas=0.9"});
  REQUIRE(!f.isOk());
  CHECK_THAT(f.status().message(), Catch::Matchers::ContainsSubstring("a pair [beta1, beta2]"));
  auto g = parse("program: p\ndata: 3\n", {});
  REQUIRE(!g.isOk());
  CHECK_THAT(g.status().message(),
             Catch::Matchers::StartsWith(
                 "cfg.yaml:2:1: error: 'data' is a section; expected a map of: kind, "
                 "train, val, dtype, block_size, vocab_size"));
}

TEST_CASE("config: interpolation errors", "[runtime][config]") {
  auto a = parse("program: ${env:NOPE}\ndata: {train: x}\n");
  REQUIRE(!a.isOk());
  CHECK_THAT(
      a.status().message(),
      Catch::Matchers::StartsWith("cfg.yaml:1:1: error: environment variable 'NOPE' is not set"));
  auto b = parse("program: ${run_dir}\nrun_dir: ${program}\ndata: {train: x}\n");
  REQUIRE(!b.isOk());
  CHECK_THAT(b.status().message(), Catch::Matchers::ContainsSubstring("refers to itself"));
  auto c = parse("program: ${nothing.here}\ndata: {train: x}\n");
  REQUIRE(!c.isOk());
  CHECK_THAT(c.status().message(),
             Catch::Matchers::ContainsSubstring("'${nothing.here}' names no config key"));
}

TEST_CASE("config: required keys", "[runtime][config]") {
  auto a = parse("data: {train: x}\n");
  REQUIRE(!a.isOk());
  CHECK_THAT(a.status().message(), Catch::Matchers::ContainsSubstring("'program' is required"));
  auto b = parse("program: p\n");
  REQUIRE(!b.isOk());
  CHECK_THAT(b.status().message(), Catch::Matchers::ContainsSubstring("'data.train' is required"));
  auto c = parse("program: p\ndata: {kind: synthetic, vocab_size: 65}\n");
  REQUIRE(c.isOk());
}

TEST_CASE("config: global batch size must equal micro x dp x accumulation", "[runtime][config]") {
  auto d = parse(kBase, {"--train.global_batch_size=32", "--train.grad_accumulation=2"});
  REQUIRE(d.isOk());
  Status st = checkBatchSizes(*d, 2);
  REQUIRE(!st.isOk());
  CHECK(st.message() == "command line: error: train.global_batch_size is 32 but "
                        "train.micro_batch_size (4) × data-parallel size (2) × "
                        "train.grad_accumulation (2) = 16");
  CHECK(checkBatchSizes(*d, 4).isOk());
  auto e = parse(kBase);
  REQUIRE(checkBatchSizes(*e, 2).isOk());
  CHECK(e->train.globalBatchSize == 8);
}

TEST_CASE("config: hash ignores bookkeeping keys", "[runtime][config]") {
  // A run stopped early resumes under another limit or signal, or none.
  auto a = parse(kBase),
       b = parse(kBase, {"--train.steps=99", "--checkpoint.every=5",
                         "--train.time_limit_minutes=30", "--checkpoint.on_signal=SIGUSR1"}),
       c = parse(kBase, {"--optimizer.lr=1e-2"});
  REQUIRE((a.isOk() && b.isOk() && c.isOk()));
  CHECK(configHash(*a) == configHash(*b));
  CHECK(b->train.timeLimitMinutes == 30);
  CHECK(b->checkpoint.onSignal == "SIGUSR1");
  CHECK(a->checkpoint.onSignal == "none");
  CHECK(configHash(*a) != configHash(*c));
  CHECK_THAT(describeConfig(*a),
             Catch::Matchers::ContainsSubstring("optimizer.betas: [0.9, 0.95]\n"));
}

TEST_CASE("config: data_parallel.bucket_view turns the gradients' bucket views on and off",
          "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(c->dataParallel.bucketView == "true");
  auto off = parse(std::string(kBase) + "data_parallel:\n  bucket_view: false\n");
  REQUIRE(off.isOk());
  CHECK(off->dataParallel.bucketView == "false");
  CHECK(configHash(*off) == configHash(*c)); // the same bits: a checkpoint resumes under either
  auto bad = parse(std::string(kBase) + "data_parallel:\n  bucket_view: maybe\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:13:3: error: 'data_parallel.bucket_view' must "
                                         "be one of: true, false, got 'maybe'"));
}

TEST_CASE("config: data_parallel.zero3_prefetch turns ZeRO-3's prefetch on and off",
          "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(c->dataParallel.zero3Prefetch == "true");
  auto off = parse(std::string(kBase) + "data_parallel:\n  zero3_prefetch: false\n");
  REQUIRE(off.isOk());
  CHECK(off->dataParallel.zero3Prefetch == "false");
  CHECK(configHash(*off) == configHash(*c)); // the same values gathered, sooner or later
  auto bad = parse(std::string(kBase) + "data_parallel:\n  zero3_prefetch: 2\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:13:3: error: 'data_parallel.zero3_prefetch' "
                                         "must be one of: true, false, got '2'"));
}

TEST_CASE("config: data_parallel.buffers chooses how copies keep buffers equal",
          "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(c->dataParallel.buffers == "broadcast");
  auto avg = parse(std::string(kBase) + "data_parallel:\n  buffers: average\n");
  REQUIRE(avg.isOk());
  CHECK(avg->dataParallel.buffers == "average");
  CHECK(configHash(*avg) != configHash(*c)); // it changes the training math
  auto bad = parse(std::string(kBase) + "data_parallel:\n  buffers: local\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:13:3: error: 'data_parallel.buffers' must "
                                         "be one of: broadcast, average, got 'local'"));
  auto key = parse(std::string(kBase) + "data_parallel:\n  buffer: average\n");
  REQUIRE(!key.isOk());
  CHECK_THAT(key.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "unknown key 'buffer' in section 'data_parallel'; expected one of: buffers"));
}

TEST_CASE("config: precision section, its defaults and its errors", "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(c->precision.mode == "fp32");
  CHECK(c->precision.gradReduceDtype == "fp32");
  CHECK(c->precision.lossScale.initial == 65536);
  auto fp16 = parse(std::string(kBase) + "precision:\n  mode: fp16\n  grad_reduce_dtype: fp16\n"
                                         "  loss_scale:\n    initial: 1024\n    hysteresis: 2\n");
  REQUIRE(fp16.isOk());
  CHECK(fp16->precision.mode == "fp16");
  CHECK(fp16->precision.gradReduceDtype == "fp16");
  CHECK(fp16->precision.lossScale.initial == 1024);
  CHECK(fp16->precision.lossScale.hysteresis == 2);
  CHECK(configHash(*fp16) != configHash(*c)); // it changes the training math
  auto mismatch =
      parse(std::string(kBase) + "precision:\n  mode: bf16\n  grad_reduce_dtype: fp16\n");
  REQUIRE(!mismatch.isOk());
  CHECK_THAT(mismatch.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:14:3: error: precision.grad_reduce_dtype "
                                         "'fp16' needs precision.mode 'fp16' (mode is 'bf16'); "
                                         "expected 'fp32' or 'bf16'"));
  auto mode = parse(std::string(kBase) + "precision:\n  mode: fp8\n");
  REQUIRE(!mode.isOk());
  CHECK_THAT(mode.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:13:3: error: 'precision.mode' must be one of: "
                                         "fp32, bf16, fp16, got 'fp8'"));
  auto backoff = parse(std::string(kBase), {"--precision.loss_scale.backoff_factor=2"});
  REQUIRE(!backoff.isOk());
  CHECK_THAT(backoff.status().message(),
             Catch::Matchers::ContainsSubstring("precision.loss_scale.backoff_factor must be "
                                                "below 1; got 2"));
  auto key = parse(std::string(kBase) + "precision:\n  loss_scale:\n    start: 8\n");
  REQUIRE(!key.isOk());
  CHECK_THAT(key.status().message(), Catch::Matchers::ContainsSubstring("unknown key 'start'"));
}

TEST_CASE("config: host_memory keeps freed memory unless told to return it",
          "[runtime][config]") {
  auto d = parse(kBase);
  REQUIRE(d.isOk());
  CHECK(d->hostMemory == "keep");
  auto r = parse(std::string(kBase) + "host_memory: return\n");
  REQUIRE(r.isOk());
  CHECK(r->hostMemory == "return");
  auto bad = parse(std::string(kBase) + "host_memory: cache\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::ContainsSubstring("cfg.yaml:12:1: error: 'host_memory' must be one of: keep, return"));
  CHECK_THAT(bad.status().message(), Catch::Matchers::ContainsSubstring("cache"));
}

TEST_CASE("config: gloo_workers run under SCHED_BATCH unless told otherwise",
          "[runtime][config]") {
  auto d = parse(kBase);
  REQUIRE(d.isOk());
  CHECK(d->glooWorkers == "batch");
  auto n = parse(std::string(kBase) + "gloo_workers: normal\n");
  REQUIRE(n.isOk());
  CHECK(n->glooWorkers == "normal");
  auto bad = parse(std::string(kBase) + "gloo_workers: idle\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "cfg.yaml:12:1: error: 'gloo_workers' must be one of: batch, normal"));
}

TEST_CASE("config: cpu_bind gives each CPU worker its cores unless told not to",
          "[runtime][config]") {
  auto d = parse(kBase);
  REQUIRE(d.isOk());
  CHECK(d->cpuBind == "cores");
  auto n = parse(std::string(kBase) + "cpu_bind: none\n");
  REQUIRE(n.isOk());
  CHECK(n->cpuBind == "none");
  auto bad = parse(std::string(kBase) + "cpu_bind: numa\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "cfg.yaml:12:1: error: 'cpu_bind' must be one of: cores, none"));
}

TEST_CASE("config: optimizer.foreach is auto unless told, and names its choices",
          "[runtime][config]") {
  auto d = parse(kBase);
  REQUIRE(d.isOk());
  CHECK(d->optimizer.foreach == "auto");
  auto on = parse(std::string(kBase) + "  foreach: true\n");
  REQUIRE(on.isOk());
  CHECK(on->optimizer.foreach == "true");
  auto bad = parse(std::string(kBase) + "  foreach: yes-please\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "cfg.yaml:12:3: error: 'optimizer.foreach' must be one of: auto, true, false"));
}

TEST_CASE("config: omp_wait is passive unless told; the environment's own policy wins",
          "[runtime][config]") {
  auto d = parse(kBase);
  REQUIRE(d.isOk());
  CHECK(d->ompWait == "passive");
  auto active = parse(std::string(kBase) + "omp_wait: active\n");
  REQUIRE(active.isOk());
  CHECK(active->ompWait == "active");
  auto bad = parse(std::string(kBase) + "omp_wait: spin\n");
  REQUIRE(!bad.isOk());
  CHECK_THAT(bad.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "cfg.yaml:12:1: error: 'omp_wait' must be one of: passive, active"));

  // What the workers start with (RunCommand.h): set only where asked and unset.
  std::string saved = std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "";
  std::string savedSpin = std::getenv("GOMP_SPINCOUNT") ? std::getenv("GOMP_SPINCOUNT") : "";
  ::unsetenv("OMP_WAIT_POLICY");
  ::unsetenv("GOMP_SPINCOUNT");
  CHECK_FALSE(rt::setPassiveOmpWait(*active));
  CHECK(std::getenv("OMP_WAIT_POLICY") == nullptr);
  CHECK(rt::setPassiveOmpWait(*d));
  CHECK(std::string(std::getenv("OMP_WAIT_POLICY")) == "PASSIVE");
  ::setenv("OMP_WAIT_POLICY", "ACTIVE", 1); // the user's choice stays
  CHECK_FALSE(rt::setPassiveOmpWait(*d));
  CHECK(std::string(std::getenv("OMP_WAIT_POLICY")) == "ACTIVE");
  ::unsetenv("OMP_WAIT_POLICY");
  ::setenv("GOMP_SPINCOUNT", "1000", 1);
  CHECK_FALSE(rt::setPassiveOmpWait(*d));
  CHECK(std::getenv("OMP_WAIT_POLICY") == nullptr);
  ::unsetenv("GOMP_SPINCOUNT");
  if (!saved.empty())
    ::setenv("OMP_WAIT_POLICY", saved.c_str(), 1);
  if (!savedSpin.empty())
    ::setenv("GOMP_SPINCOUNT", savedSpin.c_str(), 1);
}

TEST_CASE("config: profile section, its defaults, ranks and errors", "[runtime][config]") {
  auto c = parse(kBase);
  REQUIRE(c.isOk());
  CHECK(!c->profile.enabled());
  CHECK(c->profile.ranks == std::vector<int64_t>{0});
  CHECK(c->profile.dir == "runs/a/profile");
  CHECK(c->profile.top == 15);
  auto on = parse(kBase, {"--profile.start_step=3", "--profile.end_step=5"});
  REQUIRE(on.isOk());
  CHECK(on->profile.enabled());
  CHECK(on->profile.lastStep() == 5);
  CHECK(on->profile.profilesRank(0));
  CHECK(!on->profile.profilesRank(1));
  CHECK(configHash(*on) == configHash(*c)); // profiling does not change the training
  auto every =
      parse(kBase, {"--profile.start_step=3", "--profile.end_step=5", "--profile.ranks=all",
                    "--profile.dir=/tmp/p", "--profile.record_shapes=true", "--profile.memory=true",
                    "--profile.top=3"});
  REQUIRE(every.isOk());
  CHECK(configHash(*every) == configHash(*c));
  CHECK(on->profile.coversStep(3));
  CHECK(on->profile.coversStep(5));
  CHECK(!on->profile.coversStep(2));
  CHECK(!on->profile.coversStep(6));
  CHECK(!c->profile.coversStep(1));
  auto one = parse(kBase, {"--profile.start_step=20"});
  REQUIRE(one.isOk());
  CHECK(one->profile.lastStep() == 20);
  auto all = parse(std::string(kBase) + "profile:\n  start_step: 2\n  ranks: all\n");
  REQUIRE(all.isOk());
  CHECK(all->profile.ranks.empty());
  CHECK(all->profile.profilesRank(7));
  auto list = parse(std::string(kBase) + "profile:\n  start_step: 2\n  ranks: [1, 3]\n");
  REQUIRE(list.isOk());
  CHECK(list->profile.ranks == std::vector<int64_t>{1, 3});
  CHECK(!list->profile.profilesRank(0));
  auto word = parse(std::string(kBase) + "profile:\n  ranks: some\n");
  REQUIRE(!word.isOk());
  CHECK_THAT(word.status().message(),
             Catch::Matchers::StartsWith("cfg.yaml:13:3: error: 'profile.ranks' must be 'all', "
                                         "a rank or a list of ranks (integers >= 0), got 'some'"));
  auto before = parse(kBase, {"--profile.start_step=4", "--profile.end_step=2"});
  REQUIRE(!before.isOk());
  CHECK_THAT(before.status().message(),
             Catch::Matchers::ContainsSubstring("profile.end_step 2 is before "
                                                "profile.start_step 4"));
  auto past = parse(kBase, {"--profile.start_step=21"});
  REQUIRE(!past.isOk());
  CHECK_THAT(past.status().message(),
             Catch::Matchers::ContainsSubstring("profile step 21 is past train.steps (20)"));
  auto endOnly = parse(kBase, {"--profile.end_step=4"});
  REQUIRE(!endOnly.isOk());
  CHECK_THAT(endOnly.status().message(),
             Catch::Matchers::ContainsSubstring("profile.end_step is set but "
                                                "profile.start_step is 0"));
}
