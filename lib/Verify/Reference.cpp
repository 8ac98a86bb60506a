// The single-process reference of nnsc-verify: the dataset both sides read
// and the original archive trained with LibTorch on the batches nnsc-run fed.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <filesystem>
#include <unistd.h>
#include <unordered_set>

#include <fmt/format.h>

#include "VerifyImpl.h"
#include "nnsc/Runtime/Dataset.h"
#include "nnsc/Runtime/Optimizer.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"

namespace nnsc::verify {

namespace {

std::optional<at::ScalarType> scalarType(ir::DType t) {
  switch (t) {
  case ir::DType::Float32:
    return at::kFloat;
  case ir::DType::Float64:
    return at::kDouble;
  case ir::DType::Float16:
    return at::kHalf;
  case ir::DType::BFloat16:
    return at::kBFloat16;
  case ir::DType::Int64:
    return at::kLong;
  case ir::DType::Int32:
    return at::kInt;
  case ir::DType::Int16:
    return at::kShort;
  case ir::DType::Int8:
    return at::kChar;
  case ir::DType::UInt8:
    return at::kByte;
  case ir::DType::Bool:
    return at::kBool;
  default:
    return std::nullopt;
  }
}

// N rows of one input, drawn as nnsc-trace draws its cpu samples: uniform in
// the spec's range ([0, 1) floats, [0, 2) integers by default).
Expected<at::Tensor> drawInput(const trace::InputSpecEntry &e, int64_t n, at::Generator &gen) {
  auto type = scalarType(e.dtype);
  if (!type)
    return errorf("{}:{}:{}: error: input '{}' has dtype {}, which nnsc-verify cannot generate",
                  e.pos.file, e.pos.line, e.pos.col, e.name, ir::dtypeName(e.dtype));
  std::vector<int64_t> shape = e.shape;
  shape[0] = n;
  auto opts = at::TensorOptions().dtype(*type);
  auto [lo, hi] = e.range.value_or(std::make_pair(0.0, ir::isFloatingPoint(e.dtype) ? 1.0 : 2.0));
  if (ir::isFloatingPoint(e.dtype))
    return at::empty(shape, opts).uniform_(lo, hi, gen);
  if (e.dtype == ir::DType::Bool)
    return at::randint(0, 2, shape, gen, opts);
  return at::randint(int64_t(lo), int64_t(hi), shape, gen, opts);
}

Expected<std::vector<at::Tensor>> readDataset(const Job &job) {
  auto file = SafetensorsFile::open(job.data);
  if (!file)
    return file.status();
  std::vector<at::Tensor> out;
  for (const auto &e : job.inputs) {
    const SafetensorsEntry *entry = (*file)->find(e.name);
    if (!entry)
      return Status::internal(fmt::format("{}: no tensor '{}'", job.data, e.name));
    auto t = at::empty(entry->shape, at::TensorOptions().dtype(*scalarType(e.dtype)));
    std::memcpy(t.data_ptr(), entry->bytes.data(), entry->bytes.size());
    out.push_back(t);
  }
  return out;
}

// The state_dict order of a module: its parameters, its buffers, then its
// children's, recursively (as torch.nn.Module.state_dict).
void collectState(const torch::jit::Module &m, const std::string &prefix,
                  std::vector<ReferenceRun::Entry> &out) {
  for (const auto &p : m.named_parameters(/*recurse=*/false))
    out.push_back({prefix + p.name, p.value, false});
  for (const auto &b : m.named_buffers(/*recurse=*/false))
    out.push_back({prefix + b.name, b.value, true});
  for (const auto &c : m.named_children())
    collectState(c.value, prefix + c.name + ".", out);
}

// Trainable leaves once each (tied weights appear under several names); Adam(W)
// decays those of >= 2 dims, as nnsc's optimizer and nanoGPT's groups do.
std::vector<rt::OptimParam> trainable(const std::vector<ReferenceRun::Entry> &state) {
  std::vector<rt::OptimParam> params;
  std::unordered_set<const void *> seen;
  for (const auto &e : state)
    if (!e.buffer && e.value.requires_grad() && seen.insert(e.value.unsafeGetTensorImpl()).second)
      params.push_back({e.name, e.value, e.value.dim() >= 2});
  return params;
}

struct Batches {
  const Job &job;
  std::vector<at::Tensor> data;
  uint64_t seed;

  std::vector<c10::IValue> at(int64_t first) const {
    int64_t n = data[0].size(0);
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < job.microBatch; ++i)
      rows.push_back(int64_t(rt::sampleRow(uint64_t(first + i), seed, uint64_t(n))));
    at::Tensor index = at::tensor(rows, at::kLong);
    std::vector<c10::IValue> inputs;
    for (const auto &t : data)
      inputs.emplace_back(t.index_select(0, index));
    return inputs;
  }
};

at::Tensor lossOf(const c10::IValue &out) {
  if (out.isTuple())
    return out.toTupleRef().elements()[0].toTensor();
  return out.toTensor();
}

std::vector<at::Tensor> buffersOf(const torch::jit::Module &m) {
  std::vector<at::Tensor> out;
  for (const auto &b : m.named_buffers(/*recurse=*/true))
    out.push_back(b.value);
  return out;
}

void assign(const std::vector<at::Tensor> &to, const std::vector<at::Tensor> &from) {
  at::NoGradGuard noGrad;
  for (size_t i = 0; i < to.size(); ++i)
    to[i].copy_(from[i]);
}

std::vector<at::Tensor> snapshot(const std::vector<at::Tensor> &ts) {
  std::vector<at::Tensor> out;
  for (const auto &t : ts)
    out.push_back(t.detach().clone());
  return out;
}

// One optimizer step's forward/backward passes; returns the mean loss. The
// buffers follow nnsc-run's default (data_parallel.buffers: broadcast, DDP's
// semantics): every copy's micro-batch starts from copy 0's buffers, and copy
// 0's updates carry on.
double accumulate(torch::jit::Module &m, const Batches &batches, const VerifyOptions &o,
                  const Job &job, int step) {
  double sum = 0;
  int accum = o.accumulation, dp = job.dpCopies;
  std::vector<at::Tensor> buffers = buffersOf(m);
  for (int micro = 0; micro < accum; ++micro) {
    std::vector<at::Tensor> start = snapshot(buffers), afterCopy0;
    for (int rank = 0; rank < dp; ++rank) {
      if (rank > 0)
        assign(buffers, start);
      int64_t first = ((int64_t(step) * accum + micro) * dp + rank) * job.microBatch;
      at::Tensor loss = lossOf(m.forward(batches.at(first)));
      (loss / double(accum * dp)).backward();
      sum += loss.item<double>();
      if (rank == 0)
        afterCopy0 = snapshot(buffers);
    }
    assign(buffers, afterCopy0);
  }
  return sum / double(accum * dp);
}

Expected<ReferenceRun> train(const VerifyOptions &o, const Job &job) {
  torch::jit::Module m = torch::jit::load(o.modelPath);
  m.train(true);
  auto data = readDataset(job);
  if (!data)
    return data.status();
  Batches batches{job, data.take(), uint64_t(o.seed)};
  ReferenceRun run;
  collectState(m, "", run.stateDict);
  std::vector<at::Tensor> initial;
  for (const auto &e : run.stateDict)
    initial.push_back(e.value.detach().clone());
  rt::Optimizer optimizer(job.optimizer, trainable(run.stateDict));
  std::vector<at::Tensor> leaves;
  for (const auto &p : optimizer.params())
    leaves.push_back(p.param);
  std::vector<int> replicas(leaves.size(), 1);
  at::manual_seed(o.seed);
  for (int step = 0; step < o.steps; ++step) {
    run.losses.push_back(accumulate(m, batches, o, job, step));
    auto norm = rt::clipGradNorm(leaves, replicas, job.optimizer.gradClip, {});
    if (!norm)
      return norm.status();
    optimizer.step(job.optimizer.lr);
    optimizer.zeroGrad();
  }
  for (size_t i = 0; i < run.stateDict.size(); ++i) {
    auto &e = run.stateDict[i];
    e.value = e.value.detach().clone();
    e.written = e.buffer && !e.value.equal(initial[i]);
  }
  return run;
}

// The dataset is drawn whole in memory (and written, and read back by every
// worker): --samples rows of every input must fit this machine's memory,
// checked before anything is drawn.
Status checkDatasetMemory(const VerifyOptions &o, const Job &job) {
  double rowBytes = 0;
  for (const auto &e : job.inputs) {
    std::vector<int64_t> row(e.shape.begin() + 1, e.shape.end());
    rowBytes += double(ir::numel(row)) * double(ir::dtypeSize(e.dtype));
  }
  double need = rowBytes * double(o.samples);
  double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (have > 0 && need > have)
    return errorf("error: --samples {} needs {:.1f} GiB for the generated dataset ({:g} bytes a "
                  "row), more than the {:.1f} GiB of memory this machine has",
                  o.samples, need / double(1 << 30), rowBytes, have / double(1 << 30));
  return Status::ok();
}

} // namespace

Status writeDataset(const VerifyOptions &o, const Job &job) {
  NNSC_RETURN_IF_ERROR(checkDatasetMemory(o, job));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(uint64_t(o.seed));
  std::vector<at::Tensor> tensors;
  std::vector<SafetensorsEntry> entries;
  for (const auto &e : job.inputs) {
    auto t = drawInput(e, o.samples, gen);
    if (!t)
      return t.status();
    tensors.push_back(t->contiguous());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor &t = tensors[i];
    entries.push_back({job.inputs[i].name,
                       std::string(ir::dtypeSafetensorsCode(job.inputs[i].dtype)), t.sizes().vec(),
                       std::string_view(static_cast<const char *>(t.data_ptr()), t.nbytes())});
  }
  NNSC_RETURN_IF_ERROR(makeDirs(std::filesystem::path(job.data).parent_path().string()));
  return writeSafetensors(job.data, entries);
}

Expected<ReferenceRun> trainReference(const VerifyOptions &o, const Job &job) {
  // As nnsc-run's workers: one thread, no graph-executor optimizations (they
  // change numerics after the first calls).
  int threads = at::get_num_threads();
  bool optimize = torch::jit::getGraphExecutorOptimize();
  at::set_num_threads(1);
  torch::jit::setGraphExecutorOptimize(false);
  Expected<ReferenceRun> run = Status::internal("reference: not run");
  try {
    run = train(o, job);
  } catch (const std::exception &e) {
    run = Status::error(
        fmt::format("{}: error: the reference (LibTorch) failed: {}", o.modelPath, e.what()));
  }
  torch::jit::setGraphExecutorOptimize(optimize);
  at::set_num_threads(threads);
  return run;
}

} // namespace nnsc::verify
