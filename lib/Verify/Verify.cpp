// nnsc-verify's driver: the options, the work directory and the stages in order.
#include "nnsc/Verify/Verify.h"

#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "VerifyImpl.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Support/File.h"

namespace nnsc::verify {

namespace fs = std::filesystem;

namespace {

// A tolerance or a rate from the command line: NaN and infinity (1e400
// reads as inf) make a check that cannot fail or a run that cannot train.
Status checkReal(const char *flag, double v, bool zeroAllowed, const char *expected) {
  bool inRange = zeroAllowed ? v >= 0 : v > 0; // false for NaN
  if (!(inRange && std::isfinite(v)))
    return errorf("error: {} {:g}: expected {}", flag, v, expected);
  return Status::ok();
}

// nnsc-verify's own numbers, checked before any file is read and before
// anything is handed to nnsc-plan's checks or to nnsc-run: the message names
// nnsc-verify's flag, not a generated file's key.
Status checkNumbers(const VerifyOptions &o) {
  if (o.ranks < 1)
    return errorf("error: --ranks {}: expected at least 1", o.ranks);
  if (o.ranks > kMaxRanks)
    return errorf("error: --ranks {} is above the limit of {} (each rank is a local CPU process)",
                  o.ranks, kMaxRanks);
  if (o.planNgpus && *o.planNgpus < 1)
    return errorf("error: --tp {}: expected at least 1", *o.planNgpus);
  if (o.planNgpus && o.ranks % *o.planNgpus != 0)
    return errorf("error: --ranks {} is not a multiple of --tp {} (the devices one model copy "
                  "spans)",
                  o.ranks, *o.planNgpus);
  if (o.steps < 1 || o.accumulation < 1)
    return errorf("error: --steps {} --accum {}: both must be at least 1", o.steps, o.accumulation);
  NNSC_RETURN_IF_ERROR(checkReal("--rtol", o.rtol, false, "a finite positive number"));
  if (o.weightsRtol)
    NNSC_RETURN_IF_ERROR(
        checkReal("--weights-rtol", *o.weightsRtol, false, "a finite positive number"));
  if (o.lr)
    NNSC_RETURN_IF_ERROR(checkReal("--lr", *o.lr, false, "a finite positive number"));
  NNSC_RETURN_IF_ERROR(checkReal("--grad-clip", o.gradClip, true, "a finite number >= 0 (0: off)"));
  if (o.samples < 1)
    return errorf("error: --samples {}: expected at least 1", o.samples);
  if (o.samples > kMaxSamples)
    return errorf("error: --samples {} is above the limit of {} rows", o.samples, kMaxSamples);
  if (o.seed < 0)
    return errorf("error: --seed {}: expected 0 to 2^63-1", o.seed);
  return Status::ok();
}

Status checkOptions(const VerifyOptions &o) {
  NNSC_RETURN_IF_ERROR(checkNumbers(o));
  if (!fs::exists(o.modelPath))
    return errorf("{}: error: no such model archive", o.modelPath);
  if (!fs::exists(o.inputsPath))
    return errorf("{}: error: no such input spec", o.inputsPath);
  if (!o.planFile.empty() && !fs::exists(o.planFile))
    return errorf("{}: error: no such plan file", o.planFile);
  plan::PlanOptions p;
  p.policy = o.policy;
  p.runtimeNgpus = o.ranks;
  p.planNgpus = o.planNgpus.value_or(0);
  p.planFile = o.planFile;
  NNSC_RETURN_IF_ERROR(plan::checkOptions(p));
  if (o.optimizer != "sgd" && o.optimizer != "adam" && o.optimizer != "adamw")
    return errorf("error: unknown optimizer '{}'; expected one of: sgd, adam, adamw", o.optimizer);
  return Status::ok();
}

rt::OptimizerConfig optimizerConfig(const VerifyOptions &o) {
  rt::OptimizerConfig c;
  bool sgd = o.optimizer == "sgd";
  c.name = o.optimizer;
  c.lr = o.lr ? *o.lr : sgd ? 0.05 : 3e-3;
  c.momentum = sgd ? o.momentum : 0.0;
  c.weightDecay = o.weightDecay >= 0 ? o.weightDecay : sgd ? 0.0 : 0.1;
  c.beta1 = 0.9, c.beta2 = 0.95;
  c.gradClip = o.gradClip;
  return c;
}

// AdamW's g / sqrt(v) turns the rounding of reordered sums into whole-size
// steps where a gradient nearly cancels (test/parity/parity.py): its weights
// get 10 x the loss tolerance unless told otherwise.
double weightsTolerance(const VerifyOptions &o) {
  if (o.weightsRtol)
    return *o.weightsRtol;
  return o.optimizer == "sgd" ? o.rtol : 10 * o.rtol;
}

Expected<std::string> makeWorkDir(const VerifyOptions &o) {
  if (!o.workDir.empty()) {
    NNSC_RETURN_IF_ERROR(makeDirs(o.workDir));
    return fs::absolute(o.workDir).string();
  }
  std::string pattern = (fs::temp_directory_path() / "nnsc-verify-XXXXXX").string();
  if (!mkdtemp(pattern.data()))
    return errorf("{}: error: cannot create a work directory", pattern);
  return pattern;
}

class Stopwatch {
public:
  double lap() {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return s;
  }

private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

Expected<bool> runStages(const VerifyOptions &o, Job &job, std::ostream &out, std::ostream &log) {
  Stopwatch clock;
  NNSC_RETURN_IF_ERROR(compileJob(o, job, log));
  log << fmt::format(
      "nnsc-verify: traced, planned ({} ranks = {} x {}) and generated in {:.1f} s\n", job.ranks,
      job.dpCopies, job.planNgpus, clock.lap());
  if (!o.faultTensor.empty())
    NNSC_RETURN_IF_ERROR(injectFault(job, o.faultTensor, log));
  NNSC_RETURN_IF_ERROR(writeDataset(o, job));
  NNSC_RETURN_IF_ERROR(writeTrainerConfig(o, job));
  NNSC_RETURN_IF_ERROR(runTrainer(o, job, log));
  log << fmt::format("nnsc-verify: nnsc-run trained {} steps in {:.1f} s\n", o.steps, clock.lap());
  auto ref = trainReference(o, job);
  if (!ref)
    return ref.status();
  log << fmt::format("nnsc-verify: reference trained in {:.1f} s\n", clock.lap());
  return compareAndReport(o, job, *ref, out);
}

} // namespace

Expected<VerifyResult> runVerify(const VerifyOptions &o, std::ostream &out, std::ostream &log) {
  NNSC_RETURN_IF_ERROR(checkOptions(o));
  auto work = makeWorkDir(o);
  if (!work)
    return work.status();
  Job job;
  job.work = *work;
  job.program = job.work + "/program";
  job.config = job.work + "/train.yaml";
  job.runDir = job.work + "/run";
  std::error_code ec; // an earlier nnsc-verify's run in the same --work: this one starts over
  fs::remove_all(job.runDir, ec);
  if (ec)
    return errorf("{}: error: cannot remove the earlier run: {}", job.runDir, ec.message());
  job.data = job.work + "/data/train.safetensors";
  job.ranks = o.ranks;
  job.optimizer = optimizerConfig(o);
  job.weightsRtol = weightsTolerance(o);
  auto passed = runStages(o, job, out, log);
  bool remove = passed && *passed && o.workDir.empty() && !o.keep;
  if (remove) {
    std::error_code ec;
    fs::remove_all(job.work, ec);
  } else {
    log << "nnsc-verify: work directory kept: " << job.work << '\n';
  }
  if (!passed)
    return passed.status();
  return VerifyResult{*passed, remove ? std::string() : job.work};
}

} // namespace nnsc::verify
