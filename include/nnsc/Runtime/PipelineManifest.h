#pragma once
/// Checks of a rank manifest's pipeline section (manifest.proto Pipeline)
/// before the runtime indexes anything with its numbers. No LibTorch.

#include <string>
#include <tuple>

#include "nnsc/Support/Status.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

/// Gradients of a pipeline tensor travel on its tag plus this; tags must stay
/// below it.
constexpr int kPipelineGradientTag = 1 << 20;

/// One channel of the pipeline's point-to-point traffic: the values (or the
/// gradients) virtual stage `srcStage` on rank `srcRank` sends to virtual
/// stage `dstStage` on rank `dstRank`, over a communicator (and, on NCCL, a
/// stream) of its own. Over one communicator a rank's transfers run in the
/// order it issues them: 1F1B's stage 0 sends micro-batch 1's activations,
/// which wait for stage 1 to receive them, while stage 1 sends micro-batch 0's
/// gradient, which waits for stage 0's receive queued behind (a deadlock once
/// a message outgrows NCCL's buffers); and NCCL pairs a send with a receive
/// by order, not tag, so one pair of ranks' transfers for different virtual
/// stages, issued in each end's schedule order, would swap. On its channel a
/// transfer waits only for the ones before it between the same two virtual
/// stages, which both ends issue micro-batch by micro-batch
/// (nnsc-codegen's checkPipelineChannels checks that they do).
struct PipeChannel {
  bool gradients = false;
  int srcRank = 0, dstRank = 0, srcStage = 0, dstStage = 0;

  auto key() const { return std::tie(gradients, srcRank, dstRank, srcStage, dstStage); }
  bool operator<(const PipeChannel &o) const { return key() < o.key(); }
  bool operator==(const PipeChannel &o) const { return key() == o.key(); }
};

/// The channel of a transfer of `t` (a tensor of `rank`'s chunk of virtual
/// stage `stage`): its value (or gradient) going out (`sending`) or coming in.
inline PipeChannel pipeChannel(const proto::PipeTensor &t, int rank, int stage, bool gradients,
                               bool sending) {
  if (sending)
    return {gradients, rank, t.peer(), stage, t.peer_stage()};
  return {gradients, t.peer(), rank, t.peer_stage(), stage};
}

/// Checks `m.pipeline()` against itself and the manifest: stage and
/// micro-batch counts, every chunk's function, every sent or received
/// tensor's peer (a rank of the job), tag, dtype and shape, and every step's
/// kind, chunk and micro-batch. Errors name `path` and the offending chunk,
/// tensor or step. A manifest without a pipeline passes.
Status checkPipelineManifest(const proto::RankManifest &m, const std::string &path);

} // namespace nnsc::rt
