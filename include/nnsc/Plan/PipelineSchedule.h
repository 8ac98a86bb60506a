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

namespace nnsc::plan {

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

/// What one micro-batch's passes take, per virtual stage k = chunk * stages +
/// stage, and what crossing from virtual stage k to k + 1 takes (activations
/// forward; the same bytes come back as gradients).
struct PassSeconds {
  std::vector<double> forward;  ///< per virtual stage
  std::vector<double> backward; ///< per virtual stage (recomputed forwards included)
  std::vector<double> transfer; ///< per boundary: virtual stages - 1 entries
};

/// The same run as simulateSchedules, timed: a pass starts once its stage
/// has finished the pass before it and its input has arrived (the
/// neighbouring virtual stage's pass finished plus the transfer). Returns
/// when each physical stage finishes its last pass. Errors: those of
/// simulateSchedules, and times of the wrong length.
Expected<std::vector<double>> timeSchedules(const std::vector<std::vector<PipelinePass>> &perStage,
                                            int chunks, int micro, const PassSeconds &seconds);

/// The most activation bytes a stage holds at once running `passes`, where a
/// forward of chunk c keeps saved[c] until its backward (1F1B's first stage
/// holds min(stages, micro) micro-batches, GPipe's every stage all of them).
double peakActivations(const std::vector<PipelinePass> &passes, const std::vector<double> &saved);

/// The most forwards a stage has run whose backward has not (any chunk).
int peakInFlight(const std::vector<PipelinePass> &passes);

} // namespace nnsc::plan
