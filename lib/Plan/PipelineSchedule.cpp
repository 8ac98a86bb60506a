// Pipeline schedules (PipelineSchedule.h).
#include "nnsc/Plan/PipelineSchedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace nnsc::plan {

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

Expected<std::vector<double>> timeSchedules(const std::vector<std::vector<PipelinePass>> &perStage,
                                            int chunks, int micro, const PassSeconds &seconds) {
  NNSC_RETURN_IF_ERROR(simulateSchedules(perStage, chunks, micro));
  const int stages = static_cast<int>(perStage.size());
  const size_t virtualStages = static_cast<size_t>(stages * chunks);
  if (seconds.forward.size() != virtualStages || seconds.backward.size() != virtualStages ||
      seconds.transfer.size() + 1 != virtualStages)
    return errorf("error: pass times for {} virtual stages: {} forward, {} backward, {} transfer",
                  virtualStages, seconds.forward.size(), seconds.backward.size(),
                  seconds.transfer.size());
  const int last = static_cast<int>(virtualStages) - 1;
  std::map<std::tuple<bool, int, int>, double> finished; // (forward, micro, vs) -> seconds
  std::vector<size_t> next(perStage.size(), 0);
  std::vector<double> clock(perStage.size(), 0.0);
  // When pass p of stage s may start for its inputs; nullopt until they exist.
  auto arrival = [&](int stage, const PipelinePass &p) -> std::optional<double> {
    int vs = p.chunk * stages + stage;
    if (p.forward) {
      if (vs == 0)
        return 0.0;
      auto it = finished.find({true, p.micro, vs - 1});
      if (it == finished.end())
        return std::nullopt;
      return it->second + seconds.transfer[static_cast<size_t>(vs - 1)];
    }
    auto own = finished.find({true, p.micro, vs});
    if (own == finished.end())
      return std::nullopt;
    if (vs == last)
      return own->second;
    auto it = finished.find({false, p.micro, vs + 1});
    if (it == finished.end())
      return std::nullopt;
    return std::max(own->second, it->second + seconds.transfer[static_cast<size_t>(vs)]);
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s)
      while (next[s] < perStage[s].size()) {
        const PipelinePass &p = perStage[s][next[s]];
        auto at = arrival(s, p);
        if (!at)
          break;
        size_t vs = static_cast<size_t>(p.chunk * stages + s);
        double start = std::max(clock[s], *at);
        clock[s] = start + (p.forward ? seconds.forward[vs] : seconds.backward[vs]);
        finished[{p.forward, p.micro, static_cast<int>(vs)}] = clock[s];
        ++next[s];
        progress = true;
      }
  }
  return clock;
}

double peakActivations(const std::vector<PipelinePass> &passes, const std::vector<double> &saved) {
  double held = 0, peak = 0;
  for (const PipelinePass &p : passes) {
    double bytes = static_cast<size_t>(p.chunk) < saved.size() ? saved[static_cast<size_t>(p.chunk)] : 0.0;
    held += p.forward ? bytes : -bytes;
    peak = std::max(peak, held);
  }
  return peak;
}

int peakInFlight(const std::vector<PipelinePass> &passes) {
  int held = 0, peak = 0;
  for (const PipelinePass &p : passes) {
    held += p.forward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

} // namespace nnsc::plan
