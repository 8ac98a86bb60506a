// Saving and resuming a trainer worker's checkpoints.
#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "TrainerImpl.h"
#include "TrainerLog.h"
#include "nnsc/Runtime/Checkpoint.h"
#include "nnsc/Runtime/CheckpointStore.h"
#include "nnsc/Support/File.h"

#include <fmt/ranges.h>

namespace nnsc::rt {

namespace fs = std::filesystem;

namespace {

Status barrier(TrainerState &s, const char *what) {
  Status st = s.comm->world().barrier()->wait();
  return st.isOk() ? st : st.withContext(fmt::format("checkpoint barrier ({})", what));
}

Expected<RankState> collectState(TrainerState &s, int64_t step, double lr) {
  RankState st;
  CheckpointMeta &m = st.meta;
  m.step = step;
  m.dataPosition = step;
  m.lrSchedule = s.schedule->name();
  m.baseLr = s.config.optimizer.lr;
  m.lastLr = lr;
  m.rngState = cpuRngState();
  if (s.device.is_cuda())
    m.cudaRngState = generatorState(s.device);
  m.configHash = configHash(s.config);
  m.rank = s.env.rank;
  m.worldSize = s.env.worldSize;
  m.dpSize = int(s.layout.dpSize);
  m.dpRank = int(s.layout.dpRank);
  m.planNgpus = s.manifest.plan_ngpus() > 0 ? s.manifest.plan_ngpus() : 1;
  m.modelName = s.manifest.model_name();
  m.zero = s.zero.empty() ? 0 : s.manifest.zero();
  m.zeroNgroups = m.zero > 0 ? std::max(1, s.manifest.zero_ngroups()) : 1;
  m.shards = s.shardInfo;
  auto values = shardValues(s); // float32 masters
  if (!values)
    return values.status();
  for (size_t i = 0; i < s.shards.size(); ++i)
    st.shards[s.shardInfo[i].localName] = (*values)[i];
  if (s.precision && s.precision->scaler())
    m.lossScale = s.precision->scaler()->state();
  m.best = s.best;
  st.optimizer = optimizerState(s);
  return st;
}

Status checkCompatible(const TrainerState &s, const CheckpointMeta &m, const std::string &dir) {
  if (m.worldSize != s.env.worldSize || m.dpSize != s.layout.dpSize)
    return errorf("{}: error: checkpoint was written by {} ranks ({} data-parallel); this job "
                  "has {} ({})",
                  dir, m.worldSize, m.dpSize, s.env.worldSize, s.layout.dpSize);
  // ZeRO-1 and ZeRO-2 keep the same pieces of the optimizer states (the
  // gradients are not saved): either resumes the other.
  int zero = s.zero.empty() ? 0 : s.manifest.zero();
  // ZeRO-3 cuts its buckets at the recompute units: other pieces.
  if ((m.zero > 0) != (zero > 0) || (m.zero == 3) != (zero == 3))
    return errorf("{}: error: checkpoint was written with ZeRO stage {}; this job runs stage {}: "
                  "merge it (nnsc-merge-ckpt) and resume from the merged file",
                  dir, m.zero, zero);
  int blocks = zero > 0 ? std::max(1, s.manifest.zero_ngroups()) : 1;
  if (zero > 0 && m.zeroNgroups != blocks)
    return errorf("{}: error: checkpoint was written with ZeRO in {} block(s) of ranks "
                  "(zero_ngroups); this job shards in {}, which partitions the optimizer states "
                  "otherwise: merge it (nnsc-merge-ckpt) and resume from the merged file",
                  dir, m.zeroNgroups, blocks);
  if (m.shards.size() != s.shardInfo.size())
    return errorf("{}: error: rank {} of the checkpoint has {} shards; the program has {}", dir,
                  s.env.rank, m.shards.size(), s.shardInfo.size());
  return Status::ok();
}

Status restoreShards(TrainerState &s, const RankState &st, const std::string &dir) {
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < s.shards.size(); ++i) {
    const std::string &name = s.shardInfo[i].localName;
    auto it = st.shards.find(name);
    if (it == st.shards.end())
      return errorf("{}: error: rank {} lacks shard '{}' of shape [{}]", dir, s.env.rank, name,
                    fmt::join(s.shards[i].sizes(), ", "));
    if (it->second.sizes() != s.shards[i].sizes())
      return errorf("{}: error: rank {}'s shard '{}' is [{}] there and [{}] in this program: the "
                    "checkpoint was written under another plan (nnsc-merge-ckpt merges it into "
                    "a file that any plan resumes from)",
                    dir, s.env.rank, name, fmt::join(it->second.sizes(), ", "),
                    fmt::join(s.shards[i].sizes(), ", "));
    setShardValue(s, i, it->second);
  }
  return Status::ok();
}

} // namespace

std::map<std::string, at::Tensor> optimizerState(const TrainerState &s) {
  auto out = s.optimizer->state();
  for (const auto &z : s.zero)
    out.merge(z->state());
  return out;
}

Status loadOptimizerState(TrainerState &s, const std::map<std::string, at::Tensor> &state,
                          const std::string &from) {
  std::vector<std::map<std::string, at::Tensor>> parts(s.zero.size() + 1);
  for (const auto &[key, value] : state) {
    std::string local = key.substr(0, key.find('/'));
    size_t k = 0;
    while (k < s.zero.size() && !s.zero[k]->has(local))
      ++k;
    parts[k == s.zero.size() ? 0 : k + 1][key] = value;
  }
  NNSC_RETURN_IF_ERROR(s.optimizer->loadState(parts[0], from));
  for (size_t k = 0; k < s.zero.size(); ++k)
    NNSC_RETURN_IF_ERROR(s.zero[k]->loadState(parts[k + 1], from));
  return Status::ok();
}

int64_t optimizerStateBytes(const TrainerState &s) {
  int64_t bytes = 0;
  for (const auto &[key, t] : s.optimizer->state())
    bytes += int64_t(t.nbytes());
  for (const auto &z : s.zero)
    bytes += z->stateBytes();
  if (s.precision)
    bytes += s.precision->masterBytes();
  return bytes;
}

namespace {

// checkpoint.save_best: a best in checkpoints/best lower than the one this run resumed with
// stays the one to beat (else this run would overwrite it with a worse one): an earlier run's
// where there is nothing to resume, or one written after the checkpoint this run continues,
// whose steps the run replays without the promise of the same losses (another config, cuda
// kernels that are not deterministic). Rank 0 reads it and every rank takes its answer (one
// broadcast): all must agree on when a validation makes a new best, whatever world size wrote
// best and wherever run_dir lies.
Status keepLowerBest(TrainerState &s) {
  const std::string dir = bestCheckpointDir(s.config.runDir);
  std::optional<CheckpointMeta::BestValidation> kept;
  Status read = Status::ok(); // rank 0's; the others learn of a failure from the broadcast
  if (s.isLogger() && isCompleteCheckpoint(dir)) {
    auto meta = readCheckpointMeta(dir, 0);
    if (!meta)
      read = meta.status();
    else if (meta->best && (!s.best || meta->best->valLoss < s.best->valLoss))
      kept = meta->best;
  }
  // [0 nothing lower, 1 kept, 2 rank 0 could not read it; its step; its loss]
  std::vector<at::Tensor> answer{
      at::tensor({!read.isOk() ? 2.0
                  : kept       ? 1.0
                               : 0.0,
                  kept ? double(kept->step) : 0.0, kept ? kept->valLoss : 0.0},
                 at::TensorOptions().dtype(at::kDouble))};
  answer[0] = answer[0].to(s.device); // NCCL carries cuda tensors only
  Status st = s.comm->world().broadcast(answer, 0)->wait();
  if (!st.isOk())
    return st.withContext(fmt::format("agreeing on the best to beat in {}", dir));
  at::Tensor got = answer[0].cpu();
  if (got[0].item<double>() == 2)
    return s.isLogger() ? read
                        : errorf("{}: error: rank 0 could not read the best to beat there", dir);
  if (got[0].item<double>() == 0)
    return Status::ok();
  auto previous = s.best;
  s.best = CheckpointMeta::BestValidation{int64_t(got[1].item<double>()), got[2].item<double>()};
  if (!s.isLogger())
    return Status::ok();
  if (s.resumedFrom.empty())
    fmt::print("nnsc-run: {} holds step {} of an earlier run (val loss {:.4f}): a new best "
               "must be lower\n",
               dir, s.best->step, s.best->valLoss);
  else
    fmt::print("nnsc-run: {} holds step {} (val loss {:.4f}), lower than the best {} recorded "
               "({}): it stays the one to beat\n",
               dir, s.best->step, s.best->valLoss, s.resumedFrom,
               previous ? fmt::format("step {}, {:.4f}", previous->step, previous->valLoss)
                        : std::string("none"));
  return Status::ok();
}

// `source` copied to `target` through a temporary name, fsynced before the rename (as every
// checkpoint file is written).
Status copyFileDurably(const fs::path &source, const fs::path &target) {
  std::ifstream in(source, std::ios::binary);
  if (!in)
    return errorf("{}: error: cannot read it", source.string());
  return writeFileAtomicStreamed(target.string(), [&](const auto &append) {
    std::vector<char> chunk(size_t(1) << 20);
    while (in) {
      in.read(chunk.data(), std::streamsize(chunk.size()));
      if (in.gcount() > 0)
        NNSC_RETURN_IF_ERROR(append(std::string_view(chunk.data(), size_t(in.gcount()))));
    }
    return in.eof() ? Status::ok() : errorf("{}: error: read failed", source.string());
  });
}

// True when checkpoints/best holds the best that this run's checkpoint recorded (the same step
// and validation loss): its own history's.
bool bestIsThisRuns(const TrainerState &s) {
  if (!s.best)
    return false;
  auto meta = readCheckpointMeta(bestCheckpointDir(s.config.runDir), 0);
  return meta && meta->best && meta->best->step == s.best->step &&
         meta->best->valLoss == s.best->valLoss;
}

// A run that does not continue the newest checkpoint of its run_dir (resumed by path or from a
// merged file, or started over with resume never) starts another history there. Every
// checkpoint of run_dir that is not this run's past moves to checkpoints/superseded-<K>: step
// checkpoints from its start on (the one it resumed from, or best's step when it resumed from
// best, excepted), all of them where it did not resume from a checkpoint of run_dir, and a best
// it did not record. Left in place, resume auto would continue their history after a crash of
// this run, pruning would count them and this run's best would overwrite theirs.
Status setAsideOtherHistory(TrainerState &s) {
  // A merged file may lie in a directory rank 0 moves: every rank has read it first.
  NNSC_RETURN_IF_ERROR(barrier(s, "before setting another history aside"));
  if (!s.isLogger())
    return Status::ok();
  const std::string &runDir = s.config.runDir;
  fs::path root = fs::path(runDir) / "checkpoints";
  std::error_code ec;
  fs::path from = s.resumedFrom.empty() || isMergedCheckpointFile(s.resumedFrom)
                      ? fs::path()
                      : fs::canonical(s.resumedFrom, ec);
  bool fromRunDir = !from.empty() && fs::equivalent(from.parent_path(), root, ec);
  bool fromBest = fromRunDir && fs::equivalent(from, bestCheckpointDir(runDir), ec);
  std::vector<std::string> names, shown;
  for (int64_t step : listCheckpoints(runDir)) {
    std::string dir = checkpointDir(runDir, step);
    bool past = fromRunDir && (step < s.startStep || (step == s.startStep &&
                                                      (fromBest || fs::equivalent(dir, from, ec))));
    if (past)
      continue;
    names.push_back(fs::path(dir).filename().string());
    shown.push_back(names.back());
  }
  if (fromRunDir && names.empty()) // resumed from the newest by its path: as resume auto
    return Status::ok();
  if (auto step = completeCheckpointStep(bestCheckpointDir(runDir)); step && !bestIsThisRuns(s)) {
    names.insert(names.end(), {"best", "best.new", "best.old"}); // a stopped replacement's too
    shown.push_back(fmt::format("best (step {})", *step));
  }
  // The metrics file as it was goes with them where this run would cut records of the other
  // history from it: those after its start, or all of them where it did not resume from this
  // run_dir (the file then starts empty).
  const std::string &metrics = s.config.metrics;
  bool metricsAhead = metricsBeyond(metrics, fromRunDir ? s.startStep : -1);
  if (metricsAhead)
    shown.push_back(fs::path(metrics).filename().string() + " (a copy)");
  if (shown.empty())
    return Status::ok();
  auto moved = setAsideCheckpoints(runDir, names);
  if (!moved)
    return moved.status();
  if (metricsAhead) {
    Status st = copyFileDurably(metrics, fs::path(*moved) / fs::path(metrics).filename());
    if (st.isOk() && !fromRunDir)
      st = writeFileAtomic(metrics, "");
    if (!st.isOk())
      return st.withContext(fmt::format(
          "setting another history aside in {} (moved there: {})", *moved,
          names.empty() ? std::string("nothing") : fmt::format("{}", fmt::join(names, ", "))));
  }
  fmt::print("nnsc-run: {} {} another history than this run's, which starts {}: set aside in {}, "
             "out of the way of resume auto and pruning\n",
             fmt::join(shown, ", "), shown.size() == 1 ? "is" : "are",
             s.startStep > 0 ? fmt::format("at step {}", s.startStep) : std::string("from scratch"),
             *moved);
  return Status::ok();
}

// resume auto with no checkpoint to resume: the records of an earlier run that saved none (it
// crashed, or had checkpoint.every 0) would be emptied out of the metrics file by this run's
// start; a copy of it goes to checkpoints/superseded-<K> first.
Status setAsideEarlierMetrics(TrainerState &s) {
  const std::string &metrics = s.config.metrics;
  if (!metricsBeyond(metrics, -1))
    return Status::ok();
  auto target = setAsideCheckpoints(s.config.runDir, {});
  if (!target)
    return target.status();
  fs::path copy = fs::path(*target) / fs::path(metrics).filename();
  NNSC_RETURN_IF_ERROR(
      copyFileDurably(metrics, copy).withContext("setting an earlier run's metrics aside"));
  fmt::print("nnsc-run: {} holds the records of an earlier run that left no step checkpoint to "
             "resume: a copy set aside in {}; this run starts it anew\n",
             metrics, *target);
  return Status::ok();
}

Status restoreTrainer(TrainerState &s) {
  if (isMergedCheckpointFile(s.config.checkpoint.resume))
    return resumeFromMerged(s, s.config.checkpoint.resume);
  auto found = findResumeCheckpoint(s.config.runDir, s.config.checkpoint.resume);
  if (!found)
    return found.status();
  if (!found->has_value())
    return Status::ok();
  std::string dir = **found;
  auto st = readRankCheckpoint(dir, s.env.rank);
  if (!st)
    return st.status();
  NNSC_RETURN_IF_ERROR(checkCompatible(s, st->meta, dir));
  NNSC_RETURN_IF_ERROR(restoreShards(s, *st, dir));
  NNSC_RETURN_IF_ERROR(loadOptimizerState(s, st->optimizer, dir));
  NNSC_RETURN_IF_ERROR(setCpuRngState(st->meta.rngState, dir));
  // A checkpoint written on cpu has no device state: cuda then draws anew.
  if (s.device.is_cuda() && !st->meta.cudaRngState.empty())
    NNSC_RETURN_IF_ERROR(setGeneratorState(s.device, st->meta.cudaRngState, dir));
  if (s.precision && s.precision->scaler() && st->meta.lossScale)
    s.precision->scaler()->setState(*st->meta.lossScale);
  if (st->meta.configHash != configHash(s.config) && s.isLogger())
    fmt::print(stderr,
               "nnsc-run: warning: {} was written with a different config (hash {} vs {}); "
               "resuming anyway\n",
               dir, st->meta.configHash, configHash(s.config));
  s.startStep = st->meta.dataPosition;
  s.resumedFrom = dir;
  s.best = st->meta.best;
  return Status::ok();
}

} // namespace

Status resumeTrainer(TrainerState &s) {
  const CheckpointConfig &c = s.config.checkpoint;
  if (s.isLogger()) // a run stopped while replacing best
    NNSC_RETURN_IF_ERROR(recoverDirectory(bestCheckpointDir(s.config.runDir)));
  // Every rank may read best next (checkpoint.resume naming it): rank 0 has recovered it.
  NNSC_RETURN_IF_ERROR(barrier(s, "finding checkpoints/best"));
  NNSC_RETURN_IF_ERROR(restoreTrainer(s));
  // resume auto continues the newest checkpoint: its history is this run's. Finding none, it
  // starts the first, and the records an earlier run left in the metrics file go aside.
  if (c.resume != "auto")
    NNSC_RETURN_IF_ERROR(setAsideOtherHistory(s));
  else if (s.resumedFrom.empty() && s.isLogger())
    NNSC_RETURN_IF_ERROR(setAsideEarlierMetrics(s));
  return c.saveBest == "true" ? keepLowerBest(s) : Status::ok();
}

namespace {

// True when `from` holds this rank's part of the checkpoint of `step`.
bool holdsStep(const TrainerState &s, const std::string &from, int64_t step) {
  auto meta = readCheckpointMeta(from, s.env.rank);
  return meta && meta->step == step;
}

// This rank's files of `from` in `dir`, as hard links (copies where the file system has no hard
// links); false where `from` does not hold the checkpoint of `step` or neither works.
bool linkRankFiles(const TrainerState &s, const std::string &from, const std::string &dir,
                   int64_t step) {
  if (!holdsStep(s, from, step))
    return false;
  for (const char *ext : {"safetensors", "json"}) {
    std::string name = fmt::format("rank{}.{}", s.env.rank, ext);
    fs::path source = fs::path(from) / name, target = fs::path(dir) / name;
    std::error_code ec;
    fs::remove(target, ec);
    fs::create_hard_link(source, target, ec);
    if (ec && !copyFileDurably(source, target).isOk())
      return false;
  }
  return true;
}

// Every rank writes its part of the checkpoint of `step` into `dir`; rank 0
// marks it complete once all have. `linkFrom`: the checkpoints/best every rank has just written
// for this step, the same bytes, so each rank links its files from there instead of
// serializing its state again (and writes it where that fails: a run_dir that is not one shared
// directory). Files are only ever replaced by rename, never rewritten in place, so the two
// names stay independent: a later best or pruning removes one and leaves the other whole.
Status writeCheckpoint(TrainerState &s, const std::string &dir, int64_t step, double lr,
                       const std::string &linkFrom = {}) {
  if (s.isLogger()) {
    NNSC_RETURN_IF_ERROR(makeDirs(dir));
    NNSC_RETURN_IF_ERROR(unmarkCheckpoint(dir)); // a stale one from an earlier run
    NNSC_RETURN_IF_ERROR(removeRankFilesBeyond(dir, s.env.worldSize)); // and a larger one's
  }
  // Copies' buffers differ since their last forward; the checkpoint holds
  // copy 0's everywhere, so replicas agree and merge (best's write synced them already).
  if (linkFrom.empty())
    NNSC_RETURN_IF_ERROR(syncBuffersForCheckpoint(s));
  // Also: rank 0 has put best in place.
  NNSC_RETURN_IF_ERROR(barrier(s, "before writing"));
  NNSC_RETURN_IF_ERROR(makeDirs(dir));
  if (linkFrom.empty() || !linkRankFiles(s, linkFrom, dir, step)) {
    auto state = collectState(s, step, lr);
    if (!state)
      return state.status();
    NNSC_RETURN_IF_ERROR(writeRankCheckpoint(dir, s.env.rank, *state));
  }
  NNSC_RETURN_IF_ERROR(barrier(s, "after writing"));
  if (!s.isLogger())
    return Status::ok();
  return markCheckpointComplete(dir, step);
}

} // namespace

Status saveCheckpoint(TrainerState &s, int64_t step, double lr, bool afterBest) {
  std::string dir = checkpointDir(s.config.runDir, step);
  NNSC_RETURN_IF_ERROR(writeCheckpoint(
      s, dir, step, lr, afterBest ? bestCheckpointDir(s.config.runDir) : std::string()));
  if (!s.isLogger())
    return Status::ok();
  return pruneCheckpoints(s.config.runDir, s.config.checkpoint.keepLast, step);
}

Status saveBestCheckpoint(TrainerState &s, int64_t step, double lr) {
  std::string dir = bestCheckpointDir(s.config.runDir);
  std::string staged = dir + ".new";
  if (s.isLogger()) // what a run stopped while writing it left there
    NNSC_RETURN_IF_ERROR(removeDirectory(staged));
  NNSC_RETURN_IF_ERROR(writeCheckpoint(s, staged, step, lr));
  if (!s.isLogger())
    return Status::ok();
  return replaceDirectory(staged, dir);
}

} // namespace nnsc::rt
