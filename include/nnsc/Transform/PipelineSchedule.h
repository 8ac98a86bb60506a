#pragma once
/// Pipeline schedules as data (docs/pipeline.md): for one rank of a pipeline
/// of `stages` physical stages, each holding `chunks` model chunks (virtual
/// stage c * stages + p on physical stage p), the ordered forward and
/// backward passes of `micro` micro-batches. A new schedule is a new function
/// here; the runtime executes whatever list the manifest carries.
///
/// Passes communicate through asynchronous sends and blocking receives: a
/// forward first receives its inputs from the previous virtual stage and
/// then sends its outputs on, a backward receives the gradients of its
/// outputs and sends those of its inputs. Every schedule here completes under
/// that rule (simulateSchedules checks it).

#include <string>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::transform {

struct PipelinePass {
  bool forward = true;
  int micro = 0; ///< micro-batch
  int chunk = 0; ///< model chunk on this rank (0 .. chunks-1)

  bool operator==(const PipelinePass &o) const {
    return forward == o.forward && micro == o.micro && chunk == o.chunk;
  }
};

/// The passes physical stage `stage` runs, in order, for `schedule`:
///  - "gpipe": every forward, then every backward (micro-batches ascending);
///  - "1f1b": stages - stage - 1 warm-up forwards, then one forward one
///    backward, then the remaining backwards (PipeDream-Flush, Megatron);
///  - "interleaved": Megatron's interleaved 1F1B over `chunks` chunks (micro
///    must be a multiple of stages);
///  - "forward": forwards only, micro-batches ascending (evaluation).
/// Errors: an unknown schedule, counts below 1, chunks > 1 without
/// "interleaved" (or "forward"), an interleaved micro count not divisible.
Expected<std::vector<PipelinePass>> pipelinePasses(const std::string &schedule, int stages,
                                                   int chunks, int micro, int stage);

/// Runs every stage's passes against each other on a linear chain of
/// virtual stages (blocking receives, sends that never block) and returns an
/// error naming the stuck stages and passes when they cannot all finish, or
/// when a pass is missing or repeated.
Status simulateSchedules(const std::vector<std::vector<PipelinePass>> &perStage, int chunks,
                         int micro);

} // namespace nnsc::transform
