#include "nnsc/Runtime/MergeCheckpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <ATen/ATen.h>

#include "TensorIO.h"
#include "TorchSave.h"
#include "nnsc/Runtime/Checkpoint.h"
#include "nnsc/Runtime/CheckpointStore.h"
#include "nnsc/Support/BlockSlice.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

namespace fs = std::filesystem;

namespace {

int64_t blocksOf(const ShardInfo &s, size_t d) { return d < s.blocks.size() ? s.blocks[d] : 1; }

std::string sliceText(const ShardInfo &s) {
  std::string out = "[";
  for (size_t d = 0; d < s.start.size(); ++d)
    out += fmt::format("{}{}:{}{}", d ? ", " : "", s.start[d], s.stop[d],
                       blocksOf(s, d) > 1 ? fmt::format(" of {} blocks", blocksOf(s, d)) : "");
  out += "]";
  if (s.valueChunks > 1)
    out += fmt::format(" value {}/{}", s.valueIndex, s.valueChunks);
  return out;
}

// The shard as a plain box over the blocked view of its full tensor.
Box boxOf(const ShardInfo &s) { return blockedBox(s.fullShape, s.start, s.stop, s.blocks); }

int64_t volume(const ShardInfo &s) {
  Box b = boxOf(s);
  int64_t v = 1;
  for (size_t d = 0; d < b.start.size(); ++d)
    v *= b.stop[d] - b.start[d];
  return v;
}

bool overlaps(const ShardInfo &a, const ShardInfo &b) {
  Box x = boxOf(a), y = boxOf(b);
  for (size_t d = 0; d < x.start.size(); ++d)
    if (x.stop[d] <= y.start[d] || y.stop[d] <= x.start[d])
      return false;
  return true;
}

bool sameBlocks(const ShardInfo &a, const ShardInfo &b) {
  for (size_t d = 0; d < a.fullShape.size(); ++d)
    if (blocksOf(a, d) != blocksOf(b, d))
      return false;
  return true;
}

Status checkPiece(const ShardPiece &p, const ShardPiece &first) {
  const ShardInfo &s = p.info;
  const std::string &name = s.originalName;
  if (s.fullShape != first.info.fullShape || s.valueChunks != first.info.valueChunks ||
      p.value.scalar_type() != first.value.scalar_type() || !sameBlocks(s, first.info))
    return errorf("error: shards of '{}' disagree on full shape, dtype, value chunks or "
                  "interleaved blocks (rank {} and rank {})",
                  name, first.rank, p.rank);
  bool ok = s.start.size() == s.fullShape.size() && s.stop.size() == s.fullShape.size() &&
            p.value.dim() == int64_t(s.fullShape.size()) && s.valueIndex >= 0 &&
            s.valueIndex < s.valueChunks &&
            (s.blocks.empty() || s.blocks.size() == s.fullShape.size());
  for (size_t d = 0; ok && d < s.fullShape.size(); ++d) {
    int64_t b = blocksOf(s, d);
    // A dimension of size 0 (a parameter with no elements) has the one slice [0:0].
    bool empty = s.fullShape[d] == 0 && s.start[d] == 0 && s.stop[d] == 0;
    ok = b >= 1 && s.fullShape[d] % b == 0 && s.start[d] >= 0 &&
         (s.start[d] < s.stop[d] || empty) && s.stop[d] <= s.fullShape[d] / b &&
         p.value.size(d) == (s.stop[d] - s.start[d]) * b;
  }
  if (!ok)
    return errorf("error: shard '{}' of rank {} does not fit '{}' (full shape [{}]): slice {}, "
                  "local shape [{}]",
                  s.localName, p.rank, name, fmt::join(s.fullShape, ", "), sliceText(s),
                  fmt::join(p.value.sizes(), ", "));
  return Status::ok();
}

// Keeps one piece per distinct (slice, value chunk); the others must equal it.
Expected<std::vector<const ShardPiece *>>
dedupeReplicas(const std::vector<const ShardPiece *> &ps) {
  std::map<std::tuple<std::vector<int64_t>, std::vector<int64_t>, int>, const ShardPiece *> seen;
  std::vector<const ShardPiece *> out;
  for (const ShardPiece *p : ps) {
    auto key = std::make_tuple(p->info.start, p->info.stop, p->info.valueIndex);
    auto [it, fresh] = seen.emplace(key, p);
    if (fresh) {
      out.push_back(p);
      continue;
    }
    if (!at::equal(it->second->value, p->value))
      return errorf("error: replicas of '{}' {} differ between rank {} and rank {}",
                    p->info.originalName, sliceText(p->info), it->second->rank, p->rank);
  }
  return out;
}

Status checkCoverage(const std::vector<const ShardPiece *> &ps, int valueIndex, int64_t numel) {
  int64_t covered = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    covered += volume(ps[i]->info);
    for (size_t j = 0; j < i; ++j)
      if (overlaps(ps[i]->info, ps[j]->info))
        return errorf("error: shards of '{}' overlap: {} (rank {}) and {} (rank {})",
                      ps[i]->info.originalName, sliceText(ps[i]->info), ps[i]->rank,
                      sliceText(ps[j]->info), ps[j]->rank);
  }
  if (covered != numel)
    return errorf("error: value chunk {} of '{}' covers {} of its {} elements", valueIndex,
                  ps.empty() ? std::string("?") : ps[0]->info.originalName, covered, numel);
  return Status::ok();
}

Expected<at::Tensor> assembleOne(const std::vector<const ShardPiece *> &all) {
  for (const ShardPiece *p : all)
    NNSC_RETURN_IF_ERROR(checkPiece(*p, *all[0]));
  auto unique = dedupeReplicas(all);
  if (!unique)
    return unique.status();
  const ShardInfo &info = all[0]->info;
  at::Tensor sum;
  for (int v = 0; v < info.valueChunks; ++v) {
    std::vector<const ShardPiece *> chunk;
    for (const ShardPiece *p : *unique)
      if (p->info.valueIndex == v)
        chunk.push_back(p);
    // Covered first: a table claiming a huge shape fails here, before anything is allocated.
    int64_t numel = 1;
    for (int64_t d : info.fullShape)
      if (d > 0 && numel > std::numeric_limits<int64_t>::max() / d)
        return errorf("error: '{}' has the full shape [{}]: more elements than int64_t counts",
                      info.originalName, fmt::join(info.fullShape, ", "));
      else
        numel *= d;
    NNSC_RETURN_IF_ERROR(checkCoverage(chunk, v, numel));
    at::Tensor full = at::zeros(info.fullShape, all[0]->value.options());
    for (const ShardPiece *p : chunk) {
      Box box = boxOf(p->info); // interleaved dims viewed as [blocks, size / blocks]
      at::Tensor dst = full.view(box.shape);
      std::vector<int64_t> local;
      for (size_t d = 0; d < box.start.size(); ++d) {
        dst = dst.narrow(int64_t(d), box.start[d], box.stop[d] - box.start[d]);
        local.push_back(box.stop[d] - box.start[d]);
      }
      dst.copy_(p->value.reshape(local));
    }
    sum = v == 0 ? full : sum.add_(full);
  }
  return sum;
}

int countRanks(const std::string &dir, const char *ext) {
  int n = 0;
  while (fs::exists(fs::path(dir) / fmt::format("rank{}.{}", n, ext)))
    ++n;
  return n;
}

Expected<std::vector<ShardInfo>> manifestShards(const std::string &dir, int rank) {
  auto m = loadRankManifest((fs::path(dir) / fmt::format("rank{}.pb", rank)).string());
  if (!m)
    return m.status();
  return shardsOfManifest(*m);
}

// The initial weights of a program directory: shards by local name (or by
// original name, as a fallback).
Status collectProgram(const std::string &dir, int rank, std::vector<ShardPiece> &out) {
  auto m = loadRankManifest((fs::path(dir) / fmt::format("rank{}.pb", rank)).string());
  if (!m)
    return m.status();
  std::string weights =
      m->weights().empty() ? fmt::format("rank{}.safetensors", rank) : m->weights();
  std::string path = (fs::path(dir) / weights).string();
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.status();
  for (const ShardInfo &s : shardsOfManifest(*m)) {
    const SafetensorsEntry *e = (*file)->find(s.localName);
    if (!e)
      e = (*file)->find(s.originalName);
    if (!e)
      return errorf("{}: error: no tensor '{}' (shard of '{}')", path, s.localName, s.originalName);
    auto t = tensorFromEntry(*e, path);
    if (!t)
      return t.status();
    if (scalarTypeOfCode(s.dtype) != t->scalar_type())
      return errorf("{}: error: tensor '{}' (shard of '{}') is {} in the file; the manifest says "
                    "{}",
                    path, e->name, s.originalName, c10::toString(t->scalar_type()), s.dtype);
    out.push_back({s, t.take(), rank});
  }
  return Status::ok();
}

Status collectCheckpoint(const std::string &dir, int rank, const std::string &manifests,
                         std::vector<ShardPiece> &out, std::vector<RankOptimizerState> &optim,
                         CheckpointMeta &meta) {
  auto state = readRankCheckpoint(dir, rank);
  if (!state)
    return state.status();
  std::vector<ShardInfo> table = state->meta.shards;
  if (!manifests.empty()) {
    auto m = manifestShards(manifests, rank);
    if (!m)
      return m.status();
    table = m.take();
  }
  for (const ShardInfo &s : table) {
    auto it = state->shards.find(s.localName);
    if (it == state->shards.end())
      return errorf("{}: error: rank {} has no shard '{}' (of '{}')", dir, rank, s.localName,
                    s.originalName);
    // Floating values stay floating (the masters may be wider than the table's dtype): a table
    // naming an integer dtype for them, or the reverse, would reinterpret their bits.
    auto tableType = scalarTypeOfCode(s.dtype);
    if (!tableType ||
        at::isFloatingType(*tableType) != at::isFloatingType(it->second.scalar_type()))
      return errorf("{}/rank{}.safetensors: error: shard '{}' (of '{}') is {}; its table says {}",
                    dir, rank, s.localName, s.originalName, c10::toString(it->second.scalar_type()),
                    s.dtype);
    out.push_back({s, it->second, rank});
  }
  optim.push_back({rank, table, state->optimizer, state->meta.zeroNgroups});
  meta = state->meta;
  return Status::ok();
}

// What resuming needs beside the optimizer states: rank 0's position and
// schedule, every copy's generator (from its first rank).
void addTrainingState(const std::vector<CheckpointMeta> &metas,
                      std::map<std::string, at::Tensor> &out) {
  const CheckpointMeta &m = metas[0];
  auto i64 = [](int64_t v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kLong)); };
  auto f64 = [](double v) { return at::scalar_tensor(v, at::TensorOptions().dtype(at::kDouble)); };
  out["nnsc/step"] = i64(m.step);
  out["nnsc/data_position"] = i64(m.dataPosition);
  out["nnsc/base_lr"] = f64(m.baseLr);
  out["nnsc/last_lr"] = f64(m.lastLr);
  out["nnsc/world_size"] = i64(m.worldSize);
  out["nnsc/dp_size"] = i64(m.dpSize);
  out["nnsc/plan_ngpus"] = i64(m.planNgpus);
  out["nnsc/zero"] = i64(m.zero);
  auto keep = [&](const std::string &key, const std::string &state) {
    if (out.count(key) || state.empty())
      return;
    at::Tensor bytes = at::empty({int64_t(state.size())}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(bytes.data_ptr(), state.data(), state.size());
    out[key] = bytes;
  };
  for (const CheckpointMeta &r : metas) {
    keep(fmt::format("nnsc/rng_state/{}", r.dpRank), r.rngState);
    keep(fmt::format("nnsc/cuda_rng_state/{}", r.dpRank), r.cudaRngState);
  }
}

// Every rank's files are of the same checkpoint as rank 0's: the same step of the same run and
// plan (files copied in from another step would merge into weights of no step at all).
Status checkSameCheckpoint(const std::vector<CheckpointMeta> &metas, const std::string &dir) {
  const CheckpointMeta &first = metas[0];
  for (size_t k = 1; k < metas.size(); ++k) {
    const CheckpointMeta &m = metas[k];
    auto differ = [&](const char *what, const std::string &mine, const std::string &rank0) {
      return errorf("{}/rank{}.json: error: {} {} where rank 0's is {}: the rank files come from "
                    "different checkpoints",
                    dir, k, what, mine, rank0);
    };
    if (m.step != first.step || m.dataPosition != first.dataPosition)
      return differ("step", std::to_string(m.step), std::to_string(first.step));
    if (m.configHash != first.configHash)
      return differ("config_hash", m.configHash, first.configHash);
    if (m.modelName != first.modelName)
      return differ("model_name", m.modelName, first.modelName);
    if (m.planNgpus != first.planNgpus)
      return differ("plan_ngpus", std::to_string(m.planNgpus), std::to_string(first.planNgpus));
    if (m.worldSize != first.worldSize)
      return differ("world_size", std::to_string(m.worldSize), std::to_string(first.worldSize));
  }
  return Status::ok();
}

// Every rank of the run that wrote the checkpoint (rank 0's world_size) has
// its files: a missing one is named, not left to a coverage error (or, under
// data parallelism, to a merge of the copies that are there).
Status checkEveryRank(const std::string &dir) {
  auto first = readRankCheckpoint(dir, 0);
  if (!first)
    return first.status();
  std::vector<std::string> missing;
  for (int k = 0; k < first->meta.worldSize; ++k)
    for (const char *ext : {"json", "safetensors"})
      if (!fs::exists(fs::path(dir) / fmt::format("rank{}.{}", k, ext)))
        missing.push_back(fmt::format("rank{}.{}", k, ext));
  if (!missing.empty()) {
    std::string list;
    for (const auto &m : missing)
      list += (list.empty() ? "" : ", ") + m;
    return errorf("{}: error: the checkpoint of {} ranks lacks {}", dir, first->meta.worldSize,
                  list);
  }
  if (fs::exists(fs::path(dir) / fmt::format("rank{}.json", first->meta.worldSize)))
    return errorf("{}: error: rank{}.json is beyond the world size {} that rank 0 records", dir,
                  first->meta.worldSize, first->meta.worldSize);
  return Status::ok();
}

// The same for a program directory: rank 0's manifest records the world size.
Status checkEveryProgramRank(const std::string &dir) {
  auto first = loadRankManifest((fs::path(dir) / "rank0.pb").string());
  if (!first)
    return first.status();
  std::vector<std::string> missing;
  for (int k = 0; k < first->world_size(); ++k)
    for (const char *ext : {"pb", "py", "safetensors"})
      if (!fs::exists(fs::path(dir) / fmt::format("rank{}.{}", k, ext)))
        missing.push_back(fmt::format("rank{}.{}", k, ext));
  if (missing.empty())
    return Status::ok();
  std::string list;
  for (const auto &m : missing)
    list += (list.empty() ? "" : ", ") + m;
  return errorf("{}: error: the program of {} ranks lacks {}", dir, first->world_size(), list);
}

Expected<std::string> resolveCheckpointDir(const std::string &input) {
  if (fs::exists(fs::path(input) / "rank0.json")) {
    if (!isCompleteCheckpoint(input))
      return errorf("{}: error: checkpoint is incomplete (no COMPLETE marker)", input);
    return input;
  }
  auto steps = listCheckpoints(input);
  if (steps.empty())
    return errorf("{}: error: neither a checkpoint (rank0.json) nor a run directory with a "
                  "complete checkpoint",
                  input);
  return checkpointDir(input, steps.back());
}

} // namespace

Expected<std::map<std::string, at::Tensor>> assembleShards(const std::vector<ShardPiece> &pieces) {
  std::map<std::string, std::vector<const ShardPiece *>> byName;
  for (const auto &p : pieces)
    byName[p.info.originalName].push_back(&p);
  std::map<std::string, at::Tensor> out;
  for (const auto &[name, ps] : byName) {
    auto t = assembleOne(ps);
    if (!t)
      return t.status();
    out[name] = *t;
    for (const ShardPiece *p : ps)
      for (const auto &alias : p->info.aliases)
        out[alias] = *t;
  }
  return out;
}

Status saveStateDict(const std::map<std::string, at::Tensor> &tensors, const std::string &path) {
  auto bytes = torchSaveBytes(tensors);
  if (!bytes)
    return bytes.status().withContext(path);
  return writeFileAtomic(path, *bytes);
}

Expected<MergeResult> mergeCheckpoint(const MergeOptions &o) {
  MergeResult r;
  std::vector<ShardPiece> pieces;
  if (o.fromProgram) {
    r.source = o.input;
    r.ranks = countRanks(o.input, "pb");
    if (r.ranks == 0)
      return errorf("{}: error: no rank0.pb here; expected a directory written by nnsc-codegen",
                    o.input);
    NNSC_RETURN_IF_ERROR(checkEveryProgramRank(o.input));
    for (int k = 0; k < r.ranks; ++k)
      NNSC_RETURN_IF_ERROR(collectProgram(o.input, k, pieces));
  } else {
    auto dir = resolveCheckpointDir(o.input);
    if (!dir)
      return dir.status();
    r.source = *dir;
    NNSC_RETURN_IF_ERROR(checkEveryRank(*dir));
    r.ranks = countRanks(*dir, "json");
    std::vector<RankOptimizerState> optim;
    std::vector<CheckpointMeta> metas(r.ranks);
    for (int k = 0; k < r.ranks; ++k)
      NNSC_RETURN_IF_ERROR(collectCheckpoint(*dir, k, o.manifests, pieces, optim, metas[k]));
    for (auto &rank : optim) // excluded tensors take their states with them
      for (auto &info : rank.table)
        if (o.exclude.count(info.originalName))
          info.trainable = false;
    auto states = assembleOptimizerStates(optim);
    if (!states)
      return states.status().withContext(r.source);
    r.optimizer = states.take();
    NNSC_RETURN_IF_ERROR(checkSameCheckpoint(metas, *dir));
    addTrainingState(metas, r.optimizer);
  }
  if (!o.exclude.empty())
    pieces.erase(std::remove_if(
                     pieces.begin(), pieces.end(),
                     [&](const ShardPiece &p) { return o.exclude.count(p.info.originalName) > 0; }),
                 pieces.end());
  auto merged = assembleShards(pieces);
  if (!merged)
    return merged.status().withContext(r.source);
  std::set<std::string> originals;
  for (const auto &p : pieces)
    originals.insert(p.info.originalName);
  r.tensors = int64_t(originals.size());
  r.aliases = int64_t(merged->size()) - r.tensors;
  // An output among the files merged would replace one of them (a checkpoint that then no
  // longer loads, a program that lost its weights).
  r.optimizerOutput = o.optimizerOutput.empty() && !o.output.empty() ? optimizerFileOf(o.output)
                                                                     : o.optimizerOutput;
  for (const std::string &path : {o.output, r.optimizerOutput}) {
    std::error_code ec;
    if (!path.empty() && fs::equivalent(fs::absolute(path).parent_path(), fs::path(r.source), ec))
      return errorf("{}: error: the output lies in {}, the directory being merged: write it "
                    "elsewhere",
                    path, r.source);
  }
  OutputTransaction outputs; // the weights and the optimizer state replaced together, or neither
  if (!o.output.empty())
    NNSC_RETURN_IF_ERROR(saveStateDict(*merged, o.output));
  if (!o.output.empty() && !r.optimizer.empty())
    NNSC_RETURN_IF_ERROR(saveStateDict(r.optimizer, r.optimizerOutput));
  else
    r.optimizerOutput.clear();
  NNSC_RETURN_IF_ERROR(outputs.commit());
  r.merged = merged.take();
  return r;
}

} // namespace nnsc::rt
