// Building a trainer worker from its config and rank manifest.
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <tuple>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/version.h>

#include "PipelineRunner.h"
#include "TensorIO.h"
#include "TrainerImpl.h"
#include "nnsc/Runtime/CpuBinding.h"
#include "nnsc/Runtime/HostMemory.h"
#include "nnsc/Runtime/PipelineManifest.h"
#include "nnsc/Runtime/RngStreams.h"
#include "nnsc/Runtime/Threads.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"

namespace nnsc::rt {

namespace fs = std::filesystem;

namespace {

std::string inProgram(const TrainerState &s, const std::string &name) {
  return (fs::path(s.programDir) / name).string();
}

Status loadManifest(TrainerState &s) {
  std::string path = inProgram(s, fmt::format("rank{}.pb", s.env.rank));
  auto m = loadRankManifest(path);
  if (!m)
    return m.status();
  s.manifest = m.take();
  if (s.manifest.rank() != s.env.rank)
    return errorf("{}: error: the manifest is for rank {}, not rank {} (a file copied over "
                  "another?)",
                  path, s.manifest.rank(), s.env.rank);
  if (s.manifest.world_size() != s.env.worldSize)
    return errorf("{}: error: the program is for {} ranks but this job has {} (from {})", path,
                  s.manifest.world_size(), s.env.worldSize, s.env.source);
  NNSC_RETURN_IF_ERROR(checkPipelineManifest(s.manifest, path));
  if (s.manifest.loss_output() < 0 && !s.manifest.has_pipeline())
    return errorf("{}: error: the program has no loss output to train on", path);
  s.shardInfo = shardsOfManifest(s.manifest);
  return Status::ok();
}

Status loadShards(TrainerState &s) {
  std::string name = s.manifest.weights().empty() ? fmt::format("rank{}.safetensors", s.env.rank)
                                                  : s.manifest.weights();
  std::string path = inProgram(s, name);
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.status();
  for (const ShardInfo &info : s.shardInfo) {
    const SafetensorsEntry *e = (*file)->find(info.localName);
    if (!e)
      e = (*file)->find(info.originalName);
    if (!e)
      return errorf("{}: error: no tensor '{}' (shard of '{}')", path, info.localName,
                    info.originalName);
    auto t = tensorFromEntry(*e, path);
    if (!t)
      return t.status();
    if (t->sizes().vec() != info.shape)
      return errorf("{}: error: tensor '{}' has shape [{}]; the manifest says [{}]", path, e->name,
                    fmt::join(t->sizes(), ", "), fmt::join(info.shape, ", "));
    at::Tensor leaf = t->to(s.device);
    if (info.trainable) {
      leaf.requires_grad_(true);
      s.trainable.push_back(leaf);
      s.trainableReplicas.push_back(info.replicas);
    }
    s.shards.push_back(leaf);
  }
  return Status::ok();
}

// precision.mode bf16 | fp16: the shards become low-precision leaves with
// float32 masters, which clipping and the optimizer see from here on. Recipe
// autocast keeps the float32 shards: only the program changes.
Status setupPrecision(TrainerState &s) {
  const PrecisionConfig &p = s.config.precision;
  if (p.mode == "fp32" || p.recipe == "autocast")
    return Status::ok();
  std::vector<bool> trainable;
  for (const ShardInfo &info : s.shardInfo)
    trainable.push_back(info.trainable);
  s.precision = std::make_unique<MixedPrecision>(p, s.shards, trainable);
  s.trainable.clear();
  for (size_t i = 0; i < s.shards.size(); ++i)
    if (s.precision->master(i).defined())
      s.trainable.push_back(s.precision->master(i));
  return Status::ok();
}

Status bindArguments(TrainerState &s, const std::string &file) {
  std::string entry = s.manifest.entry();
  if (entry.empty() && s.program->functions().size() == 1)
    entry = s.program->functions()[0];
  NNSC_RETURN_IF_ERROR(s.program->setEntry(entry));
  if (s.manifest.has_pipeline())
    return Status::ok(); // PipelineRunner binds every stage's function
  auto names = s.program->argumentNames(entry);
  if (!names)
    return names.status();
  std::map<std::string, int> shardIndex, inputIndex;
  for (size_t i = 0; i < s.shardInfo.size(); ++i)
    shardIndex[s.shardInfo[i].localName] = int(i);
  for (int i = 0; i < fedInputCount(s); ++i)
    inputIndex[s.manifest.inputs(i).name()] = i;
  for (const auto &n : *names) {
    ArgBinding b;
    if (shardIndex.count(n))
      b.shard = shardIndex[n];
    else if (inputIndex.count(n))
      b.input = inputIndex[n];
    else if (n == "device")
      b.device = true;
    else
      return errorf("{}: error: argument '{}' of {} is neither a shard, nor {} of rank{}.pb, "
                    "nor 'device'",
                    file, n, entry,
                    s.config.data.kind == "tensors" ? "an input"
                                                    : "one of the first two inputs (x, y)",
                    s.env.rank);
    s.args.push_back(b);
  }
  return Status::ok();
}

Status compileProgram(TrainerState &s) {
  std::string name =
      s.manifest.program().empty() ? fmt::format("rank{}.py", s.env.rank) : s.manifest.program();
  std::string path = inProgram(s, name);
  auto program = Program::load(path);
  if (!program)
    return program.status();
  s.program.emplace(program.take());
  const PrecisionConfig &precision = s.config.precision;
  if (precision.mode != "fp32")
    s.program->computeMatmulsIn(precisionDtype(precision.mode));
  if (precision.mode != "fp32" && precision.recipe == "autocast")
    s.program->computeAutocastFloat32Ops();
  else if (precision.mode != "fp32" && precision.lossDtype == "fp32")
    s.program->computeLossesInFloat32();
  return bindArguments(s, path);
}

Status connect(TrainerState &s) {
  CommOptions opts;
  opts.backend =
      s.config.backend == "auto" ? (s.config.device == "cuda" ? "nccl" : "gloo") : s.config.backend;
  opts.timeout = std::chrono::milliseconds(int64_t(s.config.commTimeoutS * 1000));
  opts.glooBatchWorkers = s.config.glooWorkers == "batch";
  if (s.device.is_cuda())
    opts.cudaDevice = s.device.index(); // the trainer's device, not a guess from the rank
  auto world = CommWorld::create(s.env, opts);
  if (!world)
    return world.status();
  s.comm = world.take();
  return s.comm->addGroups(groupSpecs(s.manifest));
}

// ZeRO in blocks: the reducer's shard and cross groups, both null when this
// rank is alone in its block.
using GroupPair = std::pair<std::shared_ptr<CommBackend>, std::shared_ptr<CommBackend>>;
Expected<GroupPair> zeroSplitGroups(const TrainerState &s, int reducer,
                                    const proto::ZeroSplit &split) {
  if (split.shard_group() < 0)
    return GroupPair{};
  GroupPair out{s.comm->group(split.shard_group()), s.comm->group(split.cross_group())};
  if (split.cross_group() < 0 || !out.first || !out.second)
    return errorf("rank{}.pb: error: reducer {}'s ZeRO blocks use groups {} and {}, and this "
                  "rank is not in {}",
                  s.env.rank, reducer, split.shard_group(), split.cross_group(),
                  out.first ? split.cross_group() : split.shard_group());
  // Inside a block times over the blocks: the reducer's group, no more or less.
  int whole = s.comm->group(s.manifest.reducers(reducer).group())->size();
  if (out.first->size() * out.second->size() != whole)
    return errorf("rank{}.pb: error: reducer {}'s ZeRO groups {} ({} ranks) and {} ({}) do not "
                  "cover its group of {} ranks",
                  s.env.rank, reducer, split.shard_group(), out.first->size(), split.cross_group(),
                  out.second->size(), whole);
  return out;
}

// ZeRO-3: the recompute functions that gather shards, in manifest order;
// unit u is the u-th.
std::vector<std::string> zero3Units(const proto::RankManifest &m) {
  std::vector<std::string> units;
  if (m.zero() < 3)
    return units;
  for (const proto::Shard &sh : m.shards())
    if (!sh.zero3_function().empty() &&
        std::find(units.begin(), units.end(), sh.zero3_function()) == units.end())
      units.push_back(sh.zero3_function());
  return units;
}

// ZeRO-3: a shard gathered in a function must be an argument of it; any
// other read would find no elements.
Status checkZero3Functions(const TrainerState &s) {
  for (const proto::Shard &sh : s.manifest.shards()) {
    const std::string &fn = sh.zero3_function();
    if (fn.empty())
      continue;
    auto args = s.program->hasFunction(fn) ? s.program->argumentNames(fn)
                                           : Expected<std::vector<std::string>>(Status::error(""));
    if (!args || std::find(args->begin(), args->end(), sh.local_name()) == args->end())
      return errorf("rank{}.pb: error: shard '{}' is to be gathered in '{}' (ZeRO-3), which {}",
                    s.env.rank, sh.local_name(), fn,
                    args ? "does not take it"
                         : fmt::format("is no function of {}", s.manifest.program()));
  }
  return Status::ok();
}

Status buildReducers(TrainerState &s) {
  const std::vector<std::string> unitNames = zero3Units(s.manifest);
  std::map<std::string, int> shardIndex;
  for (size_t i = 0; i < s.shardInfo.size(); ++i)
    shardIndex[s.shardInfo[i].localName] = int(i);
  auto timeout = std::chrono::milliseconds(int64_t(s.config.commTimeoutS * 1000));
  for (int r = 0; r < s.manifest.reducers_size(); ++r) {
    const auto &spec = s.manifest.reducers(r);
    auto group = s.comm->group(spec.group());
    if (!group)
      return errorf("rank{}.pb: error: reducer {} uses group {}, which this rank is not in",
                    s.env.rank, r, spec.group());
    std::vector<at::Tensor> params;
    std::vector<std::string> names;
    std::vector<int> units; // ZeRO-3: each shard's unit, -1 none
    for (const auto &n : spec.shards()) {
      auto it = shardIndex.find(n);
      if (it == shardIndex.end() || !s.shardInfo[it->second].trainable)
        return errorf("rank{}.pb: error: reducer {} names '{}', which is not a trainable shard",
                      s.env.rank, r, n);
      params.push_back(s.shards[it->second]);
      names.push_back(n);
      const std::string &fn = s.manifest.shards(it->second).zero3_function();
      units.push_back(
          fn.empty() ? -1
                     : int(std::find(unitNames.begin(), unitNames.end(), fn) - unitNames.begin()));
    }
    // ZeRO-1 shards the optimizer states over the ranks holding these shards,
    // ZeRO-2 the gradients too; in blocks, over those of this rank's block.
    bool scatter = s.manifest.zero() >= 1 && group->size() > 1;
    std::shared_ptr<CommBackend> cross;
    if (scatter && spec.has_zero_split()) {
      auto split = zeroSplitGroups(s, r, spec.zero_split());
      if (!split)
        return split.status();
      scatter = split->first != nullptr;
      if (scatter)
        std::tie(group, cross) = *split;
    }
    std::vector<at::Tensor> masters;
    for (const auto &n : spec.shards())
      if (s.precision)
        masters.push_back(s.precision->master(size_t(shardIndex[n])));
    if (!scatter || unitNames.empty())
      units.clear();
    s.reducers.push_back(std::make_unique<Reducer>(group, params, names, spec.bucket_bytes(),
                                                   spec.average(), timeout, spec.divisor(), scatter,
                                                   s.manifest.zero() >= 2, cross, units));
    if (s.precision)
      s.reducers.back()->setMainGrads(std::move(masters), s.precision->reduceDtype());
    s.reducers.back()->useBucketViews(s.config.dataParallel.bucketView == "true");
  }
  return Status::ok();
}

Status buildBufferSyncs(TrainerState &s) {
  auto policy = bufferPolicyOf(s.config.dataParallel.buffers);
  if (!policy)
    return Status::error(
        formatError(s.config.positionOf("data_parallel.buffers"), policy.status().message()));
  s.bufferPolicy = *policy;
  std::map<std::string, int> shardIndex;
  for (size_t i = 0; i < s.shardInfo.size(); ++i)
    shardIndex[s.shardInfo[i].localName] = int(i);
  for (const auto &spec : s.manifest.buffer_syncs()) {
    auto group = s.comm->group(spec.group());
    if (!group)
      return errorf("rank{}.pb: error: a buffer sync uses group {}, which this rank is not in",
                    s.env.rank, spec.group());
    std::vector<at::Tensor> buffers;
    std::vector<std::string> names;
    for (const auto &n : spec.shards()) {
      auto it = shardIndex.find(n);
      if (it == shardIndex.end() || s.shardInfo[it->second].trainable)
        return errorf("rank{}.pb: error: a buffer sync names '{}', which is not a buffer shard",
                      s.env.rank, n);
      buffers.push_back(s.shards[it->second]);
      names.push_back(s.shardInfo[it->second].originalName);
    }
    s.bufferSyncs.push_back(std::make_unique<BufferSync>(group, buffers, names));
  }
  return Status::ok();
}

void buildOptimizer(TrainerState &s) {
  std::map<std::string, OptimParam> byName;
  std::vector<OptimParam> params;
  for (size_t i = 0; i < s.shardInfo.size(); ++i)
    if (s.shardInfo[i].trainable)
      byName[s.shardInfo[i].localName] = {s.shardInfo[i].localName, shardValue(s, i),
                                          s.shardInfo[i].fullShape.size() >= 2};
  for (auto &r : s.reducers) {
    if (!r->scatters())
      continue;
    std::vector<OptimParam> mine;
    for (const std::string &n : r->names()) {
      mine.push_back(byName[n]);
      byName.erase(n);
    }
    s.zero.push_back(std::make_unique<ZeroOptimizer>(s.config.optimizer, *r, std::move(mine)));
    // ZeRO-3: the optimizer took this rank's ranges of the unit buckets' values.
    if (s.manifest.zero() >= 3) {
      if (!s.zero3)
        s.zero3 = std::make_unique<Zero3Params>();
      s.zero3->add(*r, *s.zero.back(), zero3Units(s.manifest));
    }
    // Mixed precision: the optimizer took this rank's ranges of the masters.
    if (s.zero.back()->shardsMasters())
      for (size_t i = 0; i < s.shardInfo.size(); ++i)
        if (s.zero.back()->has(s.shardInfo[i].localName))
          s.precision->releaseMaster(i);
  }
  for (size_t i = 0; i < s.shardInfo.size(); ++i) {
    auto it = byName.find(s.shardInfo[i].localName);
    if (it == byName.end())
      continue;
    params.push_back(it->second);
    s.plainTrainable.push_back(shardValue(s, i));
    s.plainReplicas.push_back(s.shardInfo[i].replicas);
  }
  s.optimizer = std::make_unique<Optimizer>(s.config.optimizer, std::move(params));
  s.schedule = std::make_unique<LrSchedule>(s.config.lrSchedule, s.config.optimizer.lr,
                                            s.config.train.steps);
}

// CPU workers of one node each take a share of its CPUs (CpuBinding.h), before
// the intra-op pool and the communication threads start.
void bindCpus(const TrainerState &s) {
  if (s.config.cpuBind == "cores" && !s.device.is_cuda())
    fmt::print(stderr, "{}",
               bindLocalWorkerOrWarn("nnsc-run", s.env.rank, s.env.localRank,
                                     s.env.localWorldSize));
}

void seedThreadsAndAllocator(TrainerState &s) {
  int64_t threads = s.config.threads;
  if (threads <= 0)
    threads = std::max<int64_t>(1, std::thread::hardware_concurrency() /
                                       std::max(1, s.env.localWorldSize));
  setIntraOpThreads(int(threads));
  if (s.config.hostMemory == "keep")
    keepFreedHostMemory();
  // The graph executor's optimizations (profiling, autodiff subgraphs)
  // change numerics from the third call on; without them step N computes the
  // same bits in a fresh (resumed) process as in a long-running one.
  torch::jit::setGraphExecutorOptimize(false);
  // Data-parallel copies draw different dropout masks; ranks of one copy
  // (tensor parallel) the same ones, except that the pieces of a split random
  // op draw from streams of their own (RngStreams.h).
  at::manual_seed(uint64_t(s.config.seed) + uint64_t(s.manifest.dp_rank()));
  setRngStreams(uint64_t(s.config.seed), s.manifest.dp_rank(), s.device.str());
}

} // namespace

int localCudaDevice(const LaunchEnv &env) {
  const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible && *visible && at::hasCUDA() && at::getNumGPUs() == 1)
    return 0;
  return env.localRank;
}

Expected<std::unique_ptr<TrainerState>> setupTrainer(const TrainerConfig &config,
                                                     const LaunchEnv &env) {
  auto s = std::make_unique<TrainerState>();
  s->config = config;
  s->env = env;
  s->programDir = config.program;
  if (config.optimizer.fused == "true" && !fusedOptimizerAvailable())
    return Status::error(formatError(
        config.positionOf("optimizer.fused"),
        fmt::format("optimizer.fused: true needs LibTorch 2.4 or later (its fused Adam, AdamW "
                    "and SGD kernels); this nnsc is built against LibTorch {}",
                    TORCH_VERSION)));
  if (config.profile.enabled())
    for (int64_t r : config.profile.ranks)
      if (r >= env.worldSize)
        return Status::error(formatError(
            config.positionOf("profile.ranks"),
            fmt::format("profile.ranks names rank {}, but this job has {} rank{} (0 to {})", r,
                        env.worldSize, env.worldSize == 1 ? "" : "s", env.worldSize - 1)));
  if (config.profile.enabled() && config.profile.profilesRank(env.rank))
    NNSC_RETURN_IF_ERROR(makeDirs(config.profile.dir)); // before the steps it would lose
  if (config.device == "cuda") {
    // Before anything is allocated there: else LibTorch's dispatcher table.
    int gpus = at::hasCUDA() ? int(at::getNumGPUs()) : 0;
    int index = localCudaDevice(env);
    if (gpus == 0 || index >= gpus)
      return Status::error(formatError(
          config.positionOf("device"),
          gpus == 0 ? std::string("device 'cuda', but this LibTorch sees no CUDA device")
                    : fmt::format("device 'cuda' for local rank {}, but this machine has {} GPUs",
                                  env.localRank, gpus)));
    s->device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
    if (config.precision.tf32 == "true") { // as nanoGPT's train.py sets both
      at::globalContext().setAllowTF32CuBLAS(true);
      at::globalContext().setAllowTF32CuDNN(true);
    }
  }
  bindCpus(*s);
  NNSC_RETURN_IF_ERROR(loadManifest(*s));
  NNSC_RETURN_IF_ERROR(checkShapes(*s));
  NNSC_RETURN_IF_ERROR(openData(*s));
  NNSC_RETURN_IF_ERROR(loadShards(*s));
  NNSC_RETURN_IF_ERROR(setupPrecision(*s));
  NNSC_RETURN_IF_ERROR(compileProgram(*s));
  NNSC_RETURN_IF_ERROR(checkZero3Functions(*s)); // before the peers wait for this rank
  NNSC_RETURN_IF_ERROR(connect(*s));
  NNSC_RETURN_IF_ERROR(buildReducers(*s));
  NNSC_RETURN_IF_ERROR(buildBufferSyncs(*s));
  if (s->manifest.has_pipeline()) {
    auto runner = PipelineRunner::create(*s);
    if (!runner)
      return runner.status();
    s->pipeline = runner.take();
  }
  buildOptimizer(*s);
  if (s->zero3) { // the optimizers hold the unit buckets' values now
    s->zero3->setPrefetch(s->config.dataParallel.zero3Prefetch == "true");
    s->zero3->releaseAll();
    Zero3Params::setActive(s->zero3.get());
  }
  seedThreadsAndAllocator(*s);
  return s;
}

} // namespace nnsc::rt
