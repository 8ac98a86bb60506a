#pragma once
// Executes a pipelined rank's schedule (manifest Pipeline; docs/pipeline.md):
// the steps in manifest order, each forward a call of its chunk's function on
// the micro-batch's inputs and received tensors, each backward an autograd
// pass from the chunk's loss and sent tensors (with the gradients received
// for them) down to its received tensors, whose gradients go back. Sends are
// asynchronous and waited for at the end of the step; receives block, with
// the communication timeout. A parameter's gradient reduction is armed before
// the last backward that adds to it, so its bucket goes out while the rest of
// the schedule runs (the caller finishes the reducers after it). Private to
// the runtime.

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

#include "TrainerImpl.h"
#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/PipelineManifest.h"
#include "nnsc/Support/Status.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

struct TrainerState;

class PipelineRunner {
public:
  /// Binds every chunk function's arguments (shards, inputs, received
  /// tensors, the device). Errors name the program, the function and the
  /// argument; and a trainer whose gradient accumulation is not the plan's
  /// micro-batch count.
  static Expected<std::unique_ptr<PipelineRunner>> create(TrainerState &s);

  /// One training step's forwards and backwards (gradients accumulate in
  /// the shards; the caller runs the reducers). Returns the sum over
  /// micro-batches of this rank's loss shares (0 without a loss).
  Expected<LossSum> train(TrainerState &s, int64_t step);
  /// Validation batch `v` forward only; adds this rank's loss share (if any).
  Status evaluate(TrainerState &s, int64_t v, LossSum &lossSum);

private:
  struct Binding {
    int shard = -1, input = -1, recv = -1;
    bool device = false;
  };
  struct Chunk {
    const proto::PipeChunk *spec = nullptr;
    std::vector<Binding> args;
  };
  /// What one (micro-batch, chunk) pass keeps between its steps.
  struct Slot {
    std::vector<at::Tensor> received, outputs, gradients;
  };

  Status run(TrainerState &s, const google::protobuf::RepeatedPtrField<proto::PipeStep> &steps,
             int64_t step, bool training, LossSum &lossSum);
  Status runStep(TrainerState &s, const proto::PipeStep &st, int64_t step, bool training,
                 LossSum &lossSum);
  Status forward(TrainerState &s, const proto::PipeStep &st, int64_t step, bool training,
                 LossSum &lossSum);
  Status backward(TrainerState &s, const proto::PipeStep &st);
  /// Transfers of tensor `t` of this rank's chunk of virtual stage `stage`.
  Status receive(TrainerState &s, int stage, const proto::PipeTensor &t, bool gradient,
                 at::Tensor &out);
  Status send(TrainerState &s, int stage, const proto::PipeTensor &t, bool gradient,
              const at::Tensor &value);
  /// The channel a transfer of `t` uses, and the peer's rank in it.
  struct Channel {
    CommBackend *backend = nullptr;
    int peer = 0;
  };
  Expected<Channel> channel(TrainerState &s, int stage, const proto::PipeTensor &t, bool gradients,
                            bool sending);
  Slot &slot(int micro, int chunk) { return slots_[{micro, chunk}]; }
  void planReductions(TrainerState &s);

  std::vector<Chunk> chunks_;
  std::map<std::pair<int, int>, Slot> slots_;
  std::vector<std::vector<at::Tensor>> batches_; ///< per micro-batch, the fed inputs
  std::vector<std::pair<WorkPtr, at::Tensor>> sends_;
  /// Tensors a rank sends to itself (stages on the same devices), by tag
  /// and direction, in order.
  std::map<std::pair<int, bool>, std::vector<at::Tensor>> local_;
  /// Training step index -> (reducer, parameter) pairs armed just before it:
  /// the backward after which no chunk of this rank adds to the gradient.
  std::map<int, std::vector<std::pair<size_t, size_t>>> armAt_;
  /// The backends of this rank's pipeline channels.
  std::map<PipeChannel, std::shared_ptr<CommBackend>> channels_;
};

} // namespace nnsc::rt
