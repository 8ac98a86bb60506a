// Pipeline schedules (PipelineSchedule.h).
#include "nnsc/Transform/PipelineSchedule.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace nnsc::transform {

namespace {

std::vector<PipelinePass> gpipe(int micro) {
  std::vector<PipelinePass> out;
  for (int i = 0; i < micro; ++i)
    out.push_back({true, i, 0});
  for (int i = 0; i < micro; ++i)
    out.push_back({false, i, 0});
  return out;
}

std::vector<PipelinePass> oneFOneB(int stages, int micro, int stage) {
  int warmup = std::min(stages - stage - 1, micro);
  std::vector<PipelinePass> out;
  for (int i = 0; i < warmup; ++i)
    out.push_back({true, i, 0});
  for (int i = 0; i + warmup < micro; ++i) {
    out.push_back({true, warmup + i, 0});
    out.push_back({false, i, 0});
  }
  for (int i = micro - warmup; i < micro; ++i)
    out.push_back({false, i, 0});
  return out;
}

// Megatron's interleaved order: the k-th forward (backward) of a rank works
// on chunk (k mod stages*chunks) / stages (counted from the last chunk for
// backwards) and micro-batch (k / (stages*chunks)) * stages + k mod stages.
PipelinePass interleavedPass(bool forward, int k, int stages, int chunks) {
  int group = stages * chunks;
  int chunk = (k % group) / stages;
  if (!forward)
    chunk = chunks - 1 - chunk;
  return {forward, (k / group) * stages + k % stages, chunk};
}

std::vector<PipelinePass> interleaved(int stages, int chunks, int micro, int stage) {
  int total = micro * chunks;
  int warmup = std::min(total, (stages - stage - 1) * 2 + (chunks - 1) * stages);
  std::vector<PipelinePass> out;
  int f = 0, b = 0;
  for (; f < warmup; ++f)
    out.push_back(interleavedPass(true, f, stages, chunks));
  while (f < total) {
    out.push_back(interleavedPass(true, f++, stages, chunks));
    out.push_back(interleavedPass(false, b++, stages, chunks));
  }
  while (b < total)
    out.push_back(interleavedPass(false, b++, stages, chunks));
  return out;
}

} // namespace

Expected<std::vector<PipelinePass>> pipelinePasses(const std::string &schedule, int stages,
                                                   int chunks, int micro, int stage) {
  if (stages < 1 || chunks < 1 || micro < 1 || stage < 0 || stage >= stages)
    return errorf("error: impossible pipeline: {} stages, {} chunks, {} micro-batches, stage {}",
                  stages, chunks, micro, stage);
  if (schedule == "forward") {
    std::vector<PipelinePass> out;
    for (int i = 0; i < micro; ++i)
      for (int c = 0; c < chunks; ++c)
        out.push_back({true, i, c});
    return out;
  }
  if (schedule == "interleaved") {
    if (micro % stages != 0)
      return errorf("error: the interleaved schedule needs micro-batches divisible by the {} "
                    "pipeline stages (got {})",
                    stages, micro);
    return interleaved(stages, chunks, micro, stage);
  }
  if (chunks != 1)
    return errorf("error: schedule '{}' runs one model chunk per stage (got {}); use "
                  "'interleaved'",
                  schedule, chunks);
  if (schedule == "gpipe")
    return gpipe(micro);
  if (schedule == "1f1b")
    return oneFOneB(stages, micro, stage);
  return errorf("error: unknown pipeline schedule '{}'; expected one of: 1f1b, gpipe, "
                "interleaved, forward",
                schedule);
}

Status simulateSchedules(const std::vector<std::vector<PipelinePass>> &perStage, int chunks,
                         int micro) {
  const int stages = static_cast<int>(perStage.size());
  const int last = stages * chunks - 1;
  // Done passes by (forward, micro, virtual stage).
  std::set<std::tuple<bool, int, int>> done;
  std::vector<size_t> next(perStage.size(), 0);
  auto ready = [&](int stage, const PipelinePass &p) {
    int vs = p.chunk * stages + stage;
    if (p.forward)
      return vs == 0 || done.count({true, p.micro, vs - 1}) > 0;
    bool own = done.count({true, p.micro, vs}) > 0;
    return own && (vs == last || done.count({false, p.micro, vs + 1}) > 0);
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s)
      while (next[s] < perStage[s].size() && ready(s, perStage[s][next[s]])) {
        const PipelinePass &p = perStage[s][next[s]++];
        if (!done.insert({p.forward, p.micro, p.chunk * stages + s}).second)
          return errorf("error: stage {} runs the {} of micro-batch {} on chunk {} twice", s,
                        p.forward ? "forward" : "backward", p.micro, p.chunk);
        progress = true;
      }
  }
  for (int s = 0; s < stages; ++s)
    if (next[s] < perStage[s].size()) {
      const PipelinePass &p = perStage[s][next[s]];
      return errorf("error: the schedule deadlocks: stage {} waits at the {} of micro-batch {} "
                    "on chunk {}",
                    s, p.forward ? "forward" : "backward", p.micro, p.chunk);
    }
  size_t expected = static_cast<size_t>(2 * stages * chunks * micro);
  if (done.size() != expected)
    return errorf("error: the schedule runs {} passes; expected {}", done.size(), expected);
  return Status::ok();
}

} // namespace nnsc::transform
