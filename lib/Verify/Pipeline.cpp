// The compile stage (trace, plan, codegen) and the parallel run (nnsc-run as
// a subprocess) of nnsc-verify.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "VerifyImpl.h"
#include "nnsc/CodeGen/CodeGen.h"
#include "nnsc/IR/Serialize.h"
#include "nnsc/Ops/Randomness.h"
#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Runtime/Launcher.h"
#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"
#include "nnsc/Trace/Trace.h"
#include "nnsc/Transform/Partition.h"
#include "nnsc/manifest.pb.h"

extern char **environ;

namespace nnsc::verify {

namespace fs = std::filesystem;

namespace {

Status traceStage(const VerifyOptions &o, Job &job, ir::Graph &graph, std::ostream &log) {
  trace::TraceOptions t;
  t.modelPath = o.modelPath;
  t.inputsPath = o.inputsPath;
  auto result = trace::traceModel(t);
  if (!result)
    return result.status();
  if (!result->weightsAvailable)
    return errorf("{}: error: the archive holds meta tensors; nnsc-verify trains real weights "
                  "(export without --meta)",
                  o.modelPath);
  for (const auto &w : result->warnings)
    log << "nnsc-verify: trace: warning: " << w << '\n';
  log << "nnsc-verify: trace: " << result->selfCheck << '\n';
  NNSC_RETURN_IF_ERROR(trace::writeTraceOutputs(t, *result, job.work + "/trace"));
  // Plan what nnsc-plan would read: the written graph (its fingerprint is the
  // one codegen checks; the in-memory trace can print differently).
  auto written = ir::readGraph(job.work + "/trace/graph.pb");
  if (!written)
    return written.status();
  graph = written.take();
  return Status::ok();
}

Status planStage(const VerifyOptions &o, Job &job, const ir::Graph &graph) {
  plan::PlanOptions p;
  p.policy = o.policy;
  p.runtimeNgpus = o.ranks;
  p.planNgpus = o.planNgpus.value_or(0);
  p.planFile = o.planFile;
  p.graphPath = job.work + "/trace/graph.pb";
  NNSC_RETURN_IF_ERROR(plan::checkOptions(p));
  auto made = plan::makePlan(graph, p);
  if (!made)
    return made.status();
  auto pg = transform::partitionGraph(graph, *made);
  if (!pg)
    return Status(pg.status()).withContext("error: the plan does not partition");
  job.planNgpus = int(made->plan_ngpus());
  job.dpCopies = int(made->runtime_ngpus() / made->plan_ngpus());
  return plan::writePlan(*made, job.work + "/plan.pb");
}

// Random ops draw different values in nnsc-run (seed + dp_rank per copy,
// split ranks) than in the one reference process: say so before a mismatch.
void warnRandomness(const ir::Graph &graph, std::ostream &log) {
  for (const auto &n : graph.nodes()) {
    if (ops::drawsRandomValues(n)) {
      log << fmt::format("nnsc-verify: warning: {} at {} draws random values; nnsc-run and the "
                         "reference draw different ones (export with dropout 0)\n",
                         n.op, n.locString());
      return;
    }
  }
}

Status describeGraph(const VerifyOptions &o, const ir::Graph &graph, Job &job) {
  job.modelClass = graph.name;
  for (const auto &t : graph.tensors())
    if (t.kind == ir::TensorKind::Param && t.requiresGrad)
      return Status::ok();
  return errorf("{}: error: the model has no trainable parameters; nnsc-verify compares "
                "training steps",
                o.modelPath);
}

std::string yamlString(const std::string &s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

} // namespace

Status compileJob(const VerifyOptions &o, Job &job, std::ostream &log) {
  auto spec = trace::readInputSpec(o.inputsPath);
  if (!spec)
    return spec.status();
  job.inputs = spec->entries;
  if (job.inputs.empty())
    return errorf("{}: error: the first input needs a batch dimension", o.inputsPath);
  for (const trace::InputSpecEntry &e : job.inputs) // nnsc-verify draws rows of each
    if (e.shape.empty())
      return errorf("{}:{}:{}: error: input '{}' has no dimension: nnsc-verify draws samples "
                    "along dimension 0 of every input",
                    e.pos.file, e.pos.line, e.pos.col, e.name);
  job.microBatch = job.inputs[0].shape[0];
  ir::Graph graph;
  NNSC_RETURN_IF_ERROR(traceStage(o, job, graph, log));
  NNSC_RETURN_IF_ERROR(describeGraph(o, graph, job));
  warnRandomness(graph, log);
  NNSC_RETURN_IF_ERROR(planStage(o, job, graph));
  codegen::CodeGenOptions c;
  c.graphPath = job.work + "/trace/graph.pb";
  c.planPath = job.work + "/plan.pb";
  c.outDir = job.program;
  std::ostringstream quiet;
  return codegen::runCodeGen(c, quiet, quiet);
}

namespace {

// Scales the float32 elements of `bytes` by 1 + 1e-3: the same factor on
// every element keeps replicas equal and slices consistent.
std::string perturbed(std::string_view bytes) {
  std::string copy(bytes);
  for (size_t i = 0; i + 4 <= copy.size(); i += 4) {
    float v;
    std::memcpy(&v, copy.data() + i, 4);
    v *= 1.001f;
    std::memcpy(copy.data() + i, &v, 4);
  }
  return copy;
}

bool names(const rt::ShardInfo &s, const std::string &tensor) {
  if (s.originalName == tensor)
    return true;
  for (const auto &a : s.aliases)
    if (a == tensor)
      return true;
  return false;
}

Expected<int> perturbRank(const Job &job, int rank, const std::string &tensor) {
  auto m = rt::loadRankManifest(fmt::format("{}/rank{}.pb", job.program, rank));
  if (!m)
    return m.status();
  std::string path =
      fmt::format("{}/{}", job.program,
                  m->weights().empty() ? fmt::format("rank{}.safetensors", rank) : m->weights());
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.status();
  std::set<std::string> locals;
  for (const auto &s : rt::shardsOfManifest(*m))
    if (names(s, tensor) && s.dtype == "F32")
      locals.insert(s.localName);
  std::deque<std::string> owned;
  std::vector<SafetensorsEntry> entries = (*file)->entries();
  for (auto &e : entries)
    if (locals.count(e.name))
      e.bytes = owned.emplace_back(perturbed(e.bytes));
  if (!owned.empty())
    NNSC_RETURN_IF_ERROR(writeSafetensors(path, entries, (*file)->metadata()));
  return int(owned.size());
}

} // namespace

Status injectFault(const Job &job, const std::string &tensor, std::ostream &log) {
  int shards = 0;
  for (int r = 0; r < job.ranks; ++r) {
    auto n = perturbRank(job, r, tensor);
    if (!n)
      return n.status();
    shards += *n;
  }
  if (shards == 0)
    return errorf("error: --inject-fault: no float32 shard of '{}' in {}", tensor, job.program);
  log << fmt::format("nnsc-verify: fault injected: {} shards of '{}' scaled by 1.001\n", shards,
                     tensor);
  return Status::ok();
}

Status writeTrainerConfig(const VerifyOptions &o, const Job &job) {
  const rt::OptimizerConfig &opt = job.optimizer;
  std::string yaml = fmt::format(
      "# written by nnsc-verify\n"
      "program: {}\nrun_dir: {}\nseed: {}\nthreads: 1\ncomm_timeout_s: 60\n"
      "data:\n  kind: tensors\n  train: {}\n"
      "train:\n  steps: {}\n  grad_accumulation: {}\n  log_every: 1\n"
      "optimizer:\n  name: {}\n  lr: {:.17g}\n  momentum: {:.17g}\n  weight_decay: {:.17g}\n"
      "  grad_clip: {:.17g}\n  betas: [{:.17g}, {:.17g}]\n  eps: {:.17g}\n"
      "lr_schedule:\n  name: constant\n"
      "checkpoint:\n  every: 0\n  keep_last: 1\n  resume: never\n",
      yamlString(job.program), yamlString(job.runDir), o.seed, yamlString(job.data), o.steps,
      o.accumulation, opt.name, opt.lr, opt.momentum, opt.weightDecay, opt.gradClip, opt.beta1,
      opt.beta2, opt.eps);
  return writeFileAtomic(job.config, yaml);
}

namespace {

std::string trainerBinary(const VerifyOptions &o) {
  if (!o.trainerBinary.empty())
    return o.trainerBinary;
  return (fs::path(rt::selfExecutable()).parent_path() / "nnsc-run").string();
}

// The last `n` lines of a file, each indented.
std::string tail(const std::string &path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (lines.size() > n)
      lines.pop_front();
  }
  std::string text;
  for (const auto &l : lines)
    text += "\n  " + l;
  return text.empty() ? std::string("\n  (nothing)") : text;
}

Expected<int> spawnAndWait(const std::vector<std::string> &argv, const std::string &logPath) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char *> args;
  for (const auto &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return errorf("{}: error: cannot start: {}", argv[0], std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return Status::internal(fmt::format("waitpid: {}", std::strerror(errno)));
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

} // namespace

Status runTrainer(const VerifyOptions &o, const Job &job, std::ostream &log) {
  std::string bin = trainerBinary(o);
  if (!fs::exists(bin))
    return errorf("{}: error: nnsc-run not found (it must sit beside nnsc-verify)", bin);
  std::string logPath = job.work + "/run.log";
  log << fmt::format("nnsc-verify: nnsc-run on {} processes (log: {})\n", job.ranks, logPath);
  auto rc = spawnAndWait({bin, job.config, "--nproc-per-node", std::to_string(job.ranks)}, logPath);
  if (!rc)
    return rc.status();
  if (*rc != 0)
    return errorf("error: nnsc-run failed (exit code {}); last lines of {}:{}", *rc, logPath,
                  tail(logPath, 12));
  return Status::ok();
}

} // namespace nnsc::verify
