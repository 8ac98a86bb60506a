// Feeding the program's data inputs: the batch shapes read from the rank
// manifest, the datasets of data.kind (token windows, synthetic ids, stored
// tensor rows) and the forward call that binds them to the arguments.
#include <cstring>

#include <ATen/ATen.h>

#include "TensorIO.h"
#include "TrainerImpl.h"

namespace nnsc::rt {

namespace {

bool feedsTensors(const TrainerState &s) { return s.config.data.kind == "tensors"; }

// A CPU tensor of `type` holding a copy of `bytes`, laid out as `shape`.
at::Tensor tensorOfBytes(const void *bytes, size_t size, at::IntArrayRef shape,
                         at::ScalarType type) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
  if (size > 0)
    std::memcpy(t.data_ptr(), bytes, size);
  return t;
}

// x and y of token data, converted to the program's input dtypes.
class TokenFeed : public DataFeed {
public:
  TokenFeed(TokenDataset data, at::ScalarType xType, at::ScalarType yType)
      : data_(std::move(data)), xType_(xType), yType_(yType) {}

  std::vector<at::Tensor> batch(const SampleLayout &layout, int64_t step,
                                int64_t micro) const override {
    TokenBatch b = data_.trainBatch(layout, step, micro);
    return {ids(b.x, b, xType_), ids(b.y, b, yType_)};
  }

private:
  static at::Tensor ids(const std::vector<int64_t> &v, const TokenBatch &b, at::ScalarType type) {
    return tensorOfBytes(v.data(), v.size() * sizeof(int64_t), {b.batch, b.block}, at::kLong)
        .to(type);
  }

  TokenDataset data_;
  at::ScalarType xType_, yType_;
};

// Rows of stored tensors, one per program input (dtypes checked on open).
class TensorFeed : public DataFeed {
public:
  explicit TensorFeed(TensorDataset data) : data_(std::move(data)) {}

  std::vector<at::Tensor> batch(const SampleLayout &layout, int64_t step,
                                int64_t micro) const override {
    std::vector<at::Tensor> out;
    for (const TensorField &f : data_.trainBatch(layout, step, micro))
      out.push_back(
          tensorOfBytes(f.bytes.data(), f.bytes.size(), f.shape, *scalarTypeOfCode(f.dtype)));
    return out;
  }

private:
  TensorDataset data_;
};

std::string shapeOf(const proto::ProgramInput &in) {
  return fmt::format("[{}]", fmt::join(in.shape(), ", "));
}

// Token data fixes B and T through the first input, [B, T] token ids.
Expected<int64_t> tokenBatchSize(TrainerState &s) {
  if (s.manifest.inputs_size() < 1 || s.manifest.inputs(0).shape_size() != 2)
    return errorf("rank{}.pb: error: nnsc-run feeds token ids [micro_batch_size, block_size]; "
                  "the program's first input is not 2-D",
                  s.env.rank);
  const auto &in = s.manifest.inputs(0);
  for (int i = 0; i < std::min(2, s.manifest.inputs_size()); ++i) {
    proto::DType dt = s.manifest.inputs(i).dtype();
    if (dt != proto::INT64 && dt != proto::INT32)
      return errorf("rank{}.pb: error: data.kind '{}' feeds token ids, but the program's input "
                    "'{}' is {}; use data.kind 'tensors' for other inputs",
                    s.env.rank, s.config.data.kind, s.manifest.inputs(i).name(),
                    proto::DType_Name(dt));
  }
  int64_t t = in.shape(1);
  if (s.config.data.blockSize != 0 && s.config.data.blockSize != t)
    return Status::error(formatError(
        s.config.positionOf("data.block_size"),
        fmt::format("data.block_size is {} but the program was generated for {} (rank{}.pb "
                    "input '{}' has shape {})",
                    s.config.data.blockSize, t, s.env.rank, in.name(), shapeOf(in))));
  s.blockSize = t;
  return in.shape(0);
}

// Tensor data feeds every input along its first dim, which must agree.
Expected<int64_t> tensorBatchSize(TrainerState &s) {
  if (s.config.data.blockSize != 0)
    return Status::error(formatError(s.config.positionOf("data.block_size"),
                                     "data.block_size applies to token data; data.kind "
                                     "'tensors' feeds whole samples"));
  if (s.manifest.inputs_size() < 1)
    return errorf("rank{}.pb: error: the program has no inputs to feed", s.env.rank);
  const auto &first = s.manifest.inputs(0);
  for (const auto &in : s.manifest.inputs()) {
    if (in.shape_size() < 1 || in.shape(0) != first.shape(0))
      return errorf("rank{}.pb: error: data.kind 'tensors' feeds every input a batch along dim "
                    "0; input '{}' has shape {} but input '{}' has {}",
                    s.env.rank, in.name(), shapeOf(in), first.name(), shapeOf(first));
    if (!scalarTypeOfCode(safetensorsCodeOfProtoDType(in.dtype())))
      return errorf("rank{}.pb: error: input '{}' has a dtype nnsc-run cannot feed", s.env.rank,
                    in.name());
  }
  s.blockSize = 1; // throughput counts samples
  return first.shape(0);
}

std::vector<TensorInputSpec> tensorInputSpecs(const TrainerState &s) {
  std::vector<TensorInputSpec> specs;
  for (const auto &in : s.manifest.inputs())
    specs.push_back({in.name(), safetensorsCodeOfProtoDType(in.dtype()),
                     std::vector<int64_t>(in.shape().begin() + 1, in.shape().end())});
  return specs;
}

Expected<std::unique_ptr<DataFeed>> openTensorFeed(const TrainerState &s, const std::string &path) {
  auto data = TensorDataset::open(path, tensorInputSpecs(s), uint64_t(s.config.seed));
  if (!data)
    return data.status();
  return std::unique_ptr<DataFeed>(std::make_unique<TensorFeed>(data.take()));
}

// The least bound the token-fed inputs put on ids (an embedding's rows, a
// loss's classes; codegen records it), and what sets it; 0: none.
std::pair<int64_t, std::string> tokenBound(const TrainerState &s) {
  std::pair<int64_t, std::string> best = {0, ""};
  for (int i = 0; i < fedInputCount(s); ++i) {
    const auto &in = s.manifest.inputs(i);
    if (in.index_bound() > 0 && (best.first == 0 || in.index_bound() < best.first))
      best = {in.index_bound(), in.index_bound_of()};
  }
  return best;
}

// Ids the model cannot index would fail deep in its forward as an internal
// error; the data is what is wrong (another tokenizer's file, a wrong
// data.dtype), so it is named here. One scan of the file per node.
Status checkTokenIds(const TrainerState &s, const TokenSource &src, const std::string &path) {
  auto [bound, of] = tokenBound(s);
  const DataConfig &d = s.config.data;
  if (bound == 0)
    return Status::ok();
  if (d.kind == "synthetic") {
    if (d.vocabSize <= bound)
      return Status::ok();
    return Status::error(formatError(
        s.config.positionOf("data.vocab_size"),
        fmt::format("data.vocab_size {} is above the model's vocabulary of {} ({})", d.vocabSize,
                    bound, of)));
  }
  if (s.env.localRank != 0)
    return Status::ok();
  uint64_t k = src.firstOutside(bound);
  if (k == src.size())
    return Status::ok();
  return errorf("{}: error: token id {} at offset {} is not below the model's vocabulary of {} "
                "({}); is data.dtype ({}) right for this file?",
                path, src.at(k), k * (d.dtype == "int32" ? 4 : 2), bound, of, d.dtype);
}

Expected<TokenDataset> openTokens(const TrainerState &s, const std::string &path, uint64_t salt) {
  const DataConfig &d = s.config.data;
  uint64_t seed = uint64_t(s.config.seed);
  if (d.kind == "synthetic") {
    auto src = syntheticTokens(d.vocabSize, seed + salt);
    NNSC_RETURN_IF_ERROR(checkTokenIds(s, *src, "synthetic data"));
    return TokenDataset::create(src, s.blockSize, seed, "synthetic data");
  }
  auto src = openTokenFile(path, d.dtype);
  if (!src)
    return src.status();
  NNSC_RETURN_IF_ERROR(checkTokenIds(s, **src, path));
  return TokenDataset::create(*src, s.blockSize, seed, path);
}

Expected<std::unique_ptr<DataFeed>> openTokenFeed(const TrainerState &s, const std::string &path,
                                                  uint64_t salt) {
  auto data = openTokens(s, path, salt);
  if (!data)
    return data.status();
  at::ScalarType y = s.inputTypes.size() > 1 ? s.inputTypes[1] : at::kLong;
  return std::unique_ptr<DataFeed>(std::make_unique<TokenFeed>(data.take(), s.inputTypes[0], y));
}

Expected<std::unique_ptr<DataFeed>> openFeed(const TrainerState &s, const std::string &path,
                                             uint64_t salt) {
  return feedsTensors(s) ? openTensorFeed(s, path) : openTokenFeed(s, path, salt);
}

} // namespace

int fedInputCount(const TrainerState &s) {
  return feedsTensors(s) ? s.manifest.inputs_size() : std::min(2, s.manifest.inputs_size());
}

Status checkShapes(TrainerState &s) {
  auto b = feedsTensors(s) ? tensorBatchSize(s) : tokenBatchSize(s);
  if (!b)
    return b.status();
  auto &train = s.config.train;
  if (train.microBatchSize != 0 && train.microBatchSize != *b) {
    const auto &in = s.manifest.inputs(0);
    return Status::error(formatError(
        s.config.positionOf("train.micro_batch_size"),
        fmt::format("train.micro_batch_size is {} but the program was generated for {} (rank{}.pb "
                    "input '{}' has shape {})",
                    train.microBatchSize, *b, s.env.rank, in.name(), shapeOf(in))));
  }
  train.microBatchSize = *b;
  for (int i = 0; i < fedInputCount(s); ++i) {
    auto type = scalarTypeOfCode(safetensorsCodeOfProtoDType(s.manifest.inputs(i).dtype()));
    s.inputTypes.push_back(type.value_or(at::kLong));
  }
  s.layout = {*b, train.gradAccumulation, s.manifest.dp_size() > 0 ? s.manifest.dp_size() : 1,
              s.manifest.dp_rank()};
  return checkBatchSizes(s.config, s.layout.dpSize);
}

Status openData(TrainerState &s) {
  const DataConfig &d = s.config.data;
  auto required = [&](const std::string &key, const std::string &msg) {
    return Status::error(formatError(s.config.positionOf(key), msg));
  };
  if (d.kind == "tensors" && d.train.empty())
    return required("data.train", "'data.train' is required when data.kind is 'tensors'");
  auto train = openFeed(s, d.train, 0);
  if (!train)
    return train.status();
  s.trainData = train.take();
  if (s.config.train.valEvery > 0 && d.kind != "synthetic" && d.val.empty())
    return required("train.val_every", "train.val_every is set but data.val names no file");
  if (d.kind == "synthetic" || !d.val.empty()) {
    auto val = openFeed(s, d.val, 1);
    if (!val)
      return val.status();
    s.valData = val.take();
  }
  return Status::ok();
}

at::Tensor programInput(const TrainerState &s, const at::Tensor &input) {
  // Mixed precision: floating inputs in the compute dtype, as the weights.
  at::ScalarType dtype =
      s.precision && input.is_floating_point() ? s.precision->computeDtype() : input.scalar_type();
  if (!s.device.is_cuda())
    return input.to(s.device, dtype);
  // To a GPU from pinned memory without waiting: the copy is queued on the
  // current stream ahead of the kernels that read it (the caching host
  // allocator keeps the pinned block until the copy has run). The dtype
  // changes on the GPU: a copy that also converts would convert on the host
  // into pageable memory first, and a copy from there waits.
  at::Tensor pinned = input.is_pinned() ? input : input.pin_memory();
  return pinned.to(s.device, pinned.scalar_type(), /*non_blocking=*/true).to(dtype);
}

at::Tensor shardValue(const TrainerState &s, size_t i) {
  return s.precision ? s.precision->fullPrecision(i) : s.shards[i];
}

at::ScalarType shardDtype(const TrainerState &s, size_t i) {
  return s.precision ? s.precision->fullDtype(i) : s.shards[i].scalar_type();
}

Expected<std::vector<at::Tensor>> shardValues(TrainerState &s) {
  std::map<std::string, at::Tensor> gathered;
  for (const auto &z : s.zero) {
    auto masters = z->gatherMasters(); // ZeRO under mixed precision: sharded masters
    if (!masters)
      return masters.status().withContext("gathering the float32 masters for a checkpoint");
    gathered.merge(*masters);
  }
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < s.shards.size(); ++i) {
    auto it = gathered.find(s.shardInfo[i].localName);
    out.push_back(it != gathered.end() ? it->second : shardValue(s, i));
  }
  return out;
}

void setShardValue(TrainerState &s, size_t i, const at::Tensor &value) {
  at::NoGradGuard noGrad;
  // ZeRO-3: the optimizer holds the values (the parameter has no elements
  // between its unit's runs); its next gather brings them.
  for (const auto &z : s.zero)
    if (z->shardsValues(s.shardInfo[i].localName)) {
      z->loadMaster(s.shardInfo[i].localName, value);
      return;
    }
  if (!s.precision) {
    s.shards[i].copy_(value);
    return;
  }
  s.precision->restore(i, value);
  if (s.precision->released(i))
    for (const auto &z : s.zero)
      if (z->has(s.shardInfo[i].localName))
        z->loadMaster(s.shardInfo[i].localName, value.to(at::kFloat));
}

Expected<at::Tensor> forwardLoss(TrainerState &s, const std::vector<at::Tensor> &inputs,
                                 Program::Mode mode) {
  if (s.zero3)
    s.zero3->beginForward();
  std::vector<c10::IValue> args;
  for (const ArgBinding &b : s.args) {
    if (b.device)
      args.emplace_back(s.device);
    else if (b.shard >= 0)
      args.emplace_back(s.shards[b.shard]);
    else
      args.emplace_back(programInput(s, inputs[b.input]));
  }
  auto outputs = s.program->run(std::move(args), mode);
  if (!outputs)
    return outputs.status();
  int idx = s.manifest.loss_output();
  if (idx >= int(outputs->size()) || !(*outputs)[idx].defined())
    return errorf("rank{}.py: error: the program returned {} outputs; the loss is output {}",
                  s.env.rank, outputs->size(), idx);
  return (*outputs)[idx];
}

} // namespace nnsc::rt
