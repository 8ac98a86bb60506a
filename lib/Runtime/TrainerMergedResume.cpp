// Resuming a trainer worker from a merged checkpoint (nnsc-merge-ckpt's
// FILE.pt and FILE.optim.pt) under whatever plan this job runs: every shard
// and optimizer state is cut from the whole tensors, checked first.
#include <cmath>
#include <filesystem>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "TorchSave.h"
#include "TrainerImpl.h"
#include "nnsc/Runtime/Checkpoint.h"
#include "nnsc/Runtime/MergeCheckpoint.h"
#include "nnsc/Support/BlockSlice.h"

namespace nnsc::rt {

namespace {

using TensorMap = std::map<std::string, at::Tensor>;

// The shard `info` of a whole tensor: the inverse of the merge (value chunk
// 0 takes the value, the others zeros, so the chunks still sum to it).
at::Tensor cutShard(const at::Tensor &full, const ShardInfo &info) {
  Box box = blockedBox(info.fullShape, info.start, info.stop, info.blocks);
  at::Tensor t = full.reshape(box.shape);
  for (size_t d = 0; d < box.start.size(); ++d)
    t = t.narrow(int64_t(d), box.start[d], box.stop[d] - box.start[d]);
  t = t.reshape(info.shape).clone();
  return info.valueIndex == 0 ? t : t.zero_();
}

std::string shapeText(at::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The whole tensor `name` (or one of its aliases) of `file`, of full shape
// `shape`; errors name the tensor and both shapes.
Expected<at::Tensor> wholeTensor(const TensorMap &file, const std::string &path,
                                 const ShardInfo &info, const std::string &suffix,
                                 const std::string &shard) {
  auto it = file.find(info.originalName + suffix);
  for (size_t a = 0; it == file.end() && a < info.aliases.size() && suffix.empty(); ++a)
    it = file.find(info.aliases[a]);
  if (it == file.end())
    return errorf("{}: error: the merged checkpoint has no tensor '{}{}', which this model's "
                  "shard '{}' needs (shape {})",
                  path, info.originalName, suffix, shard, shapeText(info.fullShape));
  if (it->second.sizes() != at::IntArrayRef(info.fullShape))
    return errorf("{}: error: tensor '{}' has shape {} in the merged checkpoint; the model's is {}",
                  path, it->first, shapeText(it->second.sizes()), shapeText(info.fullShape));
  return it->second;
}

Expected<int64_t> scalarOf(const TensorMap &file, const std::string &path, const char *key) {
  auto it = file.find(key);
  if (it == file.end() || it->second.numel() != 1)
    return errorf("{}: error: no '{}' (is it nnsc-merge-ckpt's FILE.optim.pt?)", path, key);
  double value = it->second.item<double>();
  if (!std::isfinite(value) || value != std::floor(value) || value < 0 || value > 9.0e15)
    return errorf("{}: error: '{}' is {}, not a step (a whole number, 0 or more)", path, key,
                  value);
  return it->second.to(at::kLong).item<int64_t>();
}

// Every shard's new value, checked against the model before any is written.
Expected<std::vector<at::Tensor>> cutShards(const TrainerState &s, const TensorMap &weights,
                                            const std::string &path) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < s.shardInfo.size(); ++i) {
    const ShardInfo &info = s.shardInfo[i];
    if (info.originalName.rfind("__const.", 0) == 0 && !weights.count(info.originalName)) {
      out.push_back(at::Tensor()); // a traced literal: the program's own value stays
      continue;
    }
    auto full = wholeTensor(weights, path, info, "", info.localName);
    if (!full)
      return full.status();
    at::ScalarType own = shardDtype(s, i);
    if (full->scalar_type() != own)
      return errorf("{}: error: tensor '{}' is {} in the merged checkpoint; the model's is {}",
                    path, info.originalName, c10::toString(full->scalar_type()),
                    c10::toString(own));
    out.push_back(cutShard(*full, info));
  }
  return out;
}

// The optimizer state of every trainable shard, keyed as Optimizer::state().
Expected<TensorMap> cutOptimizerStates(const TrainerState &s, const TensorMap &optim,
                                       const std::string &path) {
  TensorMap out;
  for (const ShardInfo &info : s.shardInfo) {
    if (!info.trainable)
      continue;
    for (const char *field : {"exp_avg", "exp_avg_sq", "momentum_buffer"}) {
      std::string suffix = std::string("/") + field;
      if (!optim.count(info.originalName + suffix))
        continue;
      if (info.valueChunks > 1)
        return errorf("{}: error: cannot restore the optimizer state of '{}' into a shard that "
                      "holds a partial sum ('{}')",
                      path, info.originalName, info.localName);
      auto full = wholeTensor(optim, path, info, suffix, info.localName);
      if (!full)
        return full.status();
      out[info.localName + suffix] = cutShard(*full, info);
    }
    if (auto it = optim.find(info.originalName + "/step"); it != optim.end())
      out[info.localName + "/step"] = it->second.clone();
  }
  return out;
}

} // namespace

Status resumeFromMerged(TrainerState &s, const std::string &path) {
  std::string optimPath = optimizerFileOf(path);
  if (!std::filesystem::exists(optimPath))
    return errorf("{}: error: no optimizer and training state beside the merged checkpoint "
                  "(expected {}, which nnsc-merge-ckpt writes with it)",
                  path, optimPath);
  auto weights = torchLoadTensors(path);
  if (!weights)
    return weights.status();
  auto optim = torchLoadTensors(optimPath);
  if (!optim)
    return optim.status();
  auto shards = cutShards(s, *weights, path);
  if (!shards)
    return shards.status();
  auto states = cutOptimizerStates(s, *optim, optimPath);
  if (!states)
    return states.status();
  auto position = scalarOf(*optim, optimPath, "nnsc/data_position");
  if (!position)
    return position.status();
  if (*position > s.config.train.steps)
    return errorf("{}: error: the merged checkpoint is at step {}, beyond train.steps {}",
                  optimPath, *position, s.config.train.steps);
  for (size_t i = 0; i < s.shards.size(); ++i)
    if ((*shards)[i].defined())
      setShardValue(s, i, (*shards)[i]);
  NNSC_RETURN_IF_ERROR(loadOptimizerState(s, *states, optimPath));
  // The generator of this rank's copy, when the merged run had that copy.
  auto restore = [&](const std::string &key, const c10::Device &device) -> Status {
    auto rng = optim->find(fmt::format("{}/{}", key, s.layout.dpRank));
    if (rng == optim->end())
      return Status::ok();
    at::Tensor bytes = rng->second.contiguous();
    return setGeneratorState(
        device, std::string(static_cast<const char *>(bytes.data_ptr()), bytes.nbytes()),
        optimPath);
  };
  NNSC_RETURN_IF_ERROR(restore("nnsc/rng_state", c10::Device(c10::kCPU)));
  if (s.device.is_cuda())
    NNSC_RETURN_IF_ERROR(restore("nnsc/cuda_rng_state", s.device));
  s.startStep = *position;
  s.resumedFrom = path;
  return Status::ok();
}

} // namespace nnsc::rt
