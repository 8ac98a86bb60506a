// The pipeline schedule's executor (PipelineRunner.h).
#include "PipelineRunner.h"

#include <set>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "TensorIO.h"
#include "TrainerImpl.h"
#include "nnsc/Runtime/PipelineManifest.h"
#include "nnsc/Runtime/RngStreams.h"
#include "nnsc/Runtime/ShardTable.h"

namespace nnsc::rt {

namespace {

// The channels this rank's transfers use (PipelineManifest.h PipeChannel):
// each received or sent tensor's, and its gradient's the other way.
std::set<PipeChannel> channelsOf(const TrainerState &s) {
  const int me = s.env.rank;
  std::set<PipeChannel> channels;
  for (const proto::PipeChunk &chunk : s.manifest.pipeline().chunks())
    for (bool sending : {false, true})
      for (const proto::PipeTensor &t : sending ? chunk.send() : chunk.recv())
        if (t.peer() != me) {
          channels.insert(pipeChannel(t, me, chunk.stage(), false, sending));
          if (t.requires_grad())
            channels.insert(pipeChannel(t, me, chunk.stage(), true, !sending));
        }
  return channels;
}

// The dtype a tensor (or its gradient) crosses a cut in: the manifest's, or
// under a 16-bit recipe the compute dtype for floating tensors. Both ends
// use it: NCCL moves bytes, so a sender's other dtype (autocast's bf16
// matmul output where the manifest says float32, a float32 loss-path
// tensor under recipe megatron) would leave the receiver waiting.
at::ScalarType wireDtype(const TrainerState &s, const proto::PipeTensor &t) {
  at::ScalarType dtype =
      scalarTypeOfCode(safetensorsCodeOfProtoDType(t.dtype())).value_or(at::kFloat);
  if (s.precision && at::isFloatingType(dtype))
    dtype = s.precision->computeDtype(); // activations travel in the compute dtype
  return dtype;
}

} // namespace

Expected<std::unique_ptr<PipelineRunner>> PipelineRunner::create(TrainerState &s) {
  const proto::Pipeline &p = s.manifest.pipeline();
  std::string file = s.manifest.program();
  if (p.micro_batches() != s.config.train.gradAccumulation)
    return errorf("rank{}.pb: error: the program is pipelined over {} micro-batches per step "
                  "(nnsc-plan --micro-batches) but train.grad_accumulation is {}; set them equal",
                  s.env.rank, p.micro_batches(), s.config.train.gradAccumulation);
  if (!s.bufferSyncs.empty())
    return errorf("{}: error: pipelined programs do not synchronize buffers across ranks yet",
                  file);
  auto runner = std::unique_ptr<PipelineRunner>(new PipelineRunner());
  std::map<std::string, int> shardIndex, inputIndex;
  for (size_t i = 0; i < s.shardInfo.size(); ++i)
    shardIndex[s.shardInfo[i].localName] = int(i);
  for (int i = 0; i < fedInputCount(s); ++i)
    inputIndex[s.manifest.inputs(i).name()] = i;
  for (const proto::PipeChunk &spec : p.chunks()) {
    auto names = s.program->argumentNames(spec.function());
    if (!names)
      return names.status();
    Chunk chunk{&spec, {}};
    for (const std::string &n : *names) {
      Binding b;
      for (int r = 0; r < spec.recv_size(); ++r)
        if (spec.recv(r).name() == n)
          b.recv = r;
      if (b.recv < 0 && shardIndex.count(n))
        b.shard = shardIndex[n];
      else if (b.recv < 0 && inputIndex.count(n))
        b.input = inputIndex[n];
      else if (b.recv < 0 && n == "device")
        b.device = true;
      else if (b.recv < 0)
        return errorf("{}: error: argument '{}' of {} is neither a shard, an input, a received "
                      "tensor of rank{}.pb, nor 'device'",
                      file, n, spec.function(), s.env.rank);
      chunk.args.push_back(b);
    }
    runner->chunks_.push_back(std::move(chunk));
  }
  runner->planReductions(s);
  // In ascending order on every rank: the first channel not yet made has both
  // its ranks making it, so no two ranks wait on each other.
  for (const PipeChannel &c : channelsOf(s)) {
    auto backend = s.comm->createChannel(
        {std::min(c.srcRank, c.dstRank), std::max(c.srcRank, c.dstRank)},
        fmt::format("nnsc/pipe/{}/{}-{}/{}-{}/", c.gradients ? "grad" : "value", c.srcRank,
                    c.dstRank, c.srcStage, c.dstStage));
    if (!backend)
      return backend.status().withContext(fmt::format(
          "pipeline: the channel of {} from rank {} (virtual stage {}) to rank {} "
          "(virtual stage {})",
          c.gradients ? "gradients" : "values", c.srcRank, c.srcStage, c.dstRank, c.dstStage));
    runner->channels_[c] = backend.take();
  }
  return runner;
}

Expected<PipelineRunner::Channel> PipelineRunner::channel(TrainerState &s, int stage,
                                                          const proto::PipeTensor &t,
                                                          bool gradients, bool sending) {
  auto it = channels_.find(pipeChannel(t, s.env.rank, stage, gradients, sending));
  if (it == channels_.end())
    return Status::internal(fmt::format("error: rank {}: no pipeline channel {} rank {}",
                                        s.env.rank, sending ? "to" : "from", t.peer()));
  return Channel{it->second.get(), t.peer() < s.env.rank ? 0 : 1}; // the pair's ranks ascend
}

// Each chunk's last backward in the training schedule; a parameter is final
// after the latest of those among the chunks that read it. One that no chunk
// reads is left to armAll() after the schedule.
void PipelineRunner::planReductions(TrainerState &s) {
  std::map<int, int> lastBackward; // chunk -> step index
  const auto &steps = s.manifest.pipeline().steps();
  for (int i = 0; i < steps.size(); ++i)
    if (steps[i].kind() == proto::PipeStep::BACKWARD)
      lastBackward[steps[i].chunk()] = i;
  std::map<const void *, int> finalStep; // shard's storage -> step index
  for (size_t c = 0; c < chunks_.size(); ++c) {
    auto last = lastBackward.find(int(c));
    if (last == lastBackward.end())
      continue;
    for (const Binding &b : chunks_[c].args)
      if (b.shard >= 0) {
        const void *key = s.shards[size_t(b.shard)].unsafeGetTensorImpl();
        auto [it, fresh] = finalStep.emplace(key, last->second);
        if (!fresh)
          it->second = std::max(it->second, last->second);
      }
  }
  for (size_t r = 0; r < s.reducers.size(); ++r) {
    const auto &params = s.reducers[r]->params();
    for (size_t k = 0; k < params.size(); ++k) {
      auto it = finalStep.find(params[k].unsafeGetTensorImpl());
      if (it != finalStep.end())
        armAt_[it->second].emplace_back(r, k);
    }
  }
}

Status PipelineRunner::receive(TrainerState &s, int stage, const proto::PipeTensor &t,
                               bool gradient, at::Tensor &out) {
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  if (t.peer() == s.env.rank) {
    auto &queue = local_[{t.tag(), gradient}];
    if (queue.empty())
      return Status::internal(fmt::format("error: rank {}: {} of {} expected from itself has "
                                          "not been computed",
                                          s.env.rank, gradient ? "the gradient" : "the value",
                                          t.name()));
    out = queue.front();
    queue.erase(queue.begin());
    return Status::ok();
  }
  out = at::empty(shape, at::TensorOptions().dtype(wireDtype(s, t)).device(s.device));
  auto from = channel(s, stage, t, gradient, /*sending=*/false);
  if (!from)
    return from.status();
  Status st =
      from->backend->recv(out, from->peer, t.tag() + (gradient ? kPipelineGradientTag : 0))->wait();
  if (!st.isOk())
    return st.withContext(fmt::format("pipeline: receiving {} of {} from rank {}",
                                      gradient ? "the gradient" : "the value", t.name(), t.peer()));
  return Status::ok();
}

Status PipelineRunner::send(TrainerState &s, int stage, const proto::PipeTensor &t, bool gradient,
                            const at::Tensor &value) {
  if (t.peer() == s.env.rank) {
    local_[{t.tag(), gradient}].push_back(value.detach().contiguous().clone());
    return Status::ok();
  }
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  if (value.sizes() != c10::IntArrayRef(shape))
    return Status::internal(fmt::format(
        "error: rank {}: {} of {} to rank {} has shape [{}]; the pipeline manifest says [{}]",
        s.env.rank, gradient ? "the gradient" : "the value", t.name(), t.peer(),
        fmt::join(value.sizes(), ", "), fmt::join(shape, ", ")));
  at::Tensor data = value.detach().to(wireDtype(s, t)).contiguous();
  auto to = channel(s, stage, t, gradient, /*sending=*/true);
  if (!to)
    return to.status();
  sends_.emplace_back(
      to->backend->send(data, to->peer, t.tag() + (gradient ? kPipelineGradientTag : 0)), data);
  return Status::ok();
}

namespace {

const char *scopeName(proto::PipeStep::Kind kind) {
  switch (kind) {
  case proto::PipeStep::RECV_ACTIVATIONS:
    return "nnsc::recv_activations";
  case proto::PipeStep::FORWARD:
    return "nnsc::forward";
  case proto::PipeStep::SEND_ACTIVATIONS:
    return "nnsc::send_activations";
  case proto::PipeStep::RECV_GRADIENTS:
    return "nnsc::recv_gradients";
  case proto::PipeStep::BACKWARD:
    return "nnsc::backward";
  case proto::PipeStep::SEND_GRADIENTS:
    return "nnsc::send_gradients";
  default:
    return "nnsc::pipeline";
  }
}

} // namespace

Status PipelineRunner::forward(TrainerState &s, const proto::PipeStep &st, int64_t step,
                               bool training, LossSum &lossSum) {
  const Chunk &chunk = chunks_[static_cast<size_t>(st.chunk())];
  Slot &sl = slot(st.micro(), st.chunk());
  std::vector<c10::IValue> args;
  for (const Binding &b : chunk.args) {
    if (b.device)
      args.emplace_back(s.device);
    else if (b.shard >= 0)
      args.emplace_back(s.shards[static_cast<size_t>(b.shard)]);
    else if (b.input >= 0)
      args.emplace_back(
          programInput(s, batches_[static_cast<size_t>(st.micro())][static_cast<size_t>(b.input)]));
    else
      args.emplace_back(sl.received[static_cast<size_t>(b.recv)]);
  }
  if (training)
    setRngForward(step * s.config.train.gradAccumulation + st.micro());
  else
    setRngForward(-1 - step);
  auto outputs = s.program->run(chunk.spec->function(), std::move(args),
                                training ? Program::Mode::Train : Program::Mode::Eval);
  if (!outputs)
    return outputs.status();
  size_t expected = size_t(chunk.spec->send_size()) + (chunk.spec->has_loss() ? 1 : 0);
  if (outputs->size() != expected)
    return errorf("rank{}.py: error: {} returned {} outputs; the manifest expects {}", s.env.rank,
                  chunk.spec->function(), outputs->size(), expected);
  if (chunk.spec->has_loss())
    lossSum.add(s, (*outputs)[0]);
  sl.outputs = outputs.take();
  return Status::ok();
}

Status PipelineRunner::backward(TrainerState &s, const proto::PipeStep &st) {
  const proto::PipeChunk &spec = *chunks_[static_cast<size_t>(st.chunk())].spec;
  Slot &sl = slot(st.micro(), st.chunk());
  std::vector<at::Tensor> roots, grads;
  size_t first = spec.has_loss() ? 1 : 0;
  if (spec.has_loss()) {
    at::Tensor loss = lossForBackward(s, sl.outputs[0]);
    if (loss.requires_grad()) {
      roots.push_back(loss);
      grads.push_back(at::ones_like(loss));
    }
  }
  for (int i = 0, g = 0; i < spec.send_size(); ++i) {
    if (!spec.send(i).requires_grad())
      continue;
    const at::Tensor &out = sl.outputs[first + static_cast<size_t>(i)];
    const at::Tensor &grad = sl.gradients[static_cast<size_t>(g++)];
    if (out.requires_grad()) {
      roots.push_back(out);
      grads.push_back(grad);
    }
  }
  if (!roots.empty())
    torch::autograd::backward(roots, grads);
  if (s.precision)
    s.precision->foldGrads(); // accumulate over micro-batches in float32
  sl.outputs.clear();
  sl.gradients.clear();
  return Status::ok();
}

Status PipelineRunner::runStep(TrainerState &s, const proto::PipeStep &st, int64_t step,
                               bool training, LossSum &lossSum) {
  const proto::PipeChunk &spec = *chunks_[static_cast<size_t>(st.chunk())].spec;
  Slot &sl = slot(st.micro(), st.chunk());
  RECORD_USER_SCOPE(scopeName(st.kind())); // a phase of a profile (Profiler.h)
  switch (st.kind()) {
  case proto::PipeStep::RECV_ACTIVATIONS:
    sl.received.clear();
    for (const proto::PipeTensor &t : spec.recv()) {
      at::Tensor value;
      NNSC_RETURN_IF_ERROR(receive(s, spec.stage(), t, false, value));
      if (training && t.requires_grad())
        value.requires_grad_(true);
      sl.received.push_back(value);
    }
    return Status::ok();
  case proto::PipeStep::FORWARD:
    return forward(s, st, step, training, lossSum);
  case proto::PipeStep::SEND_ACTIVATIONS: {
    size_t first = spec.has_loss() ? 1 : 0;
    for (int i = 0; i < spec.send_size(); ++i)
      NNSC_RETURN_IF_ERROR(
          send(s, spec.stage(), spec.send(i), false, sl.outputs[first + size_t(i)]));
    if (!training)
      sl.outputs.clear();
    return Status::ok();
  }
  case proto::PipeStep::RECV_GRADIENTS:
    sl.gradients.clear();
    for (const proto::PipeTensor &t : spec.send())
      if (t.requires_grad()) {
        at::Tensor grad;
        NNSC_RETURN_IF_ERROR(receive(s, spec.stage(), t, true, grad));
        sl.gradients.push_back(grad);
      }
    return Status::ok();
  case proto::PipeStep::BACKWARD:
    return backward(s, st);
  case proto::PipeStep::SEND_GRADIENTS:
    for (int i = 0; i < spec.recv_size(); ++i) {
      if (!spec.recv(i).requires_grad())
        continue;
      const at::Tensor &leaf = sl.received[static_cast<size_t>(i)];
      at::Tensor grad = leaf.grad().defined() ? leaf.grad() : at::zeros_like(leaf);
      NNSC_RETURN_IF_ERROR(send(s, spec.stage(), spec.recv(i), true, grad));
    }
    sl.received.clear();
    return Status::ok();
  default:
    return errorf("error: rank {}: unknown pipeline step kind {}", s.env.rank, int(st.kind()));
  }
}

Status PipelineRunner::run(TrainerState &s,
                           const google::protobuf::RepeatedPtrField<proto::PipeStep> &steps,
                           int64_t step, bool training, LossSum &lossSum) {
  slots_.clear();
  local_.clear();
  for (int i = 0; i < steps.size(); ++i) {
    if (training)
      if (auto arm = armAt_.find(i); arm != armAt_.end())
        for (auto [r, k] : arm->second)
          s.reducers[r]->arm(k);
    NNSC_RETURN_IF_ERROR(runStep(s, steps[i], step, training, lossSum));
  }
  for (auto &[work, tensor] : sends_)
    NNSC_RETURN_IF_ERROR(work->wait().withContext("pipeline: sending to the next stage"));
  sends_.clear();
  slots_.clear();
  return Status::ok();
}

Expected<LossSum> PipelineRunner::train(TrainerState &s, int64_t step) {
  batches_.clear();
  for (int64_t micro = 0; micro < s.config.train.gradAccumulation; ++micro)
    batches_.push_back(s.trainData->batch(s.layout, step, micro));
  LossSum lossSum;
  NNSC_RETURN_IF_ERROR(run(s, s.manifest.pipeline().steps(), step, true, lossSum));
  return lossSum;
}

Status PipelineRunner::evaluate(TrainerState &s, int64_t v, LossSum &lossSum) {
  at::NoGradGuard noGrad;
  batches_ = {s.valData->valBatch(s.layout, v)};
  return run(s, s.manifest.pipeline().eval_steps(), v, false, lossSum);
}

} // namespace nnsc::rt
