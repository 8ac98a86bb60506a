#pragma once
/// Profiling a range of training steps with LibTorch's profiler, the one
/// torch.profiler drives: every operator the program, the autograd engine
/// and the optimizer dispatch, nnsc's own phases as user scopes
/// (nnsc::step#N, nnsc::forward, nnsc::backward, ...), and, with a LibTorch
/// built with Kineto (pip's CUDA wheels), the GPU kernels and copies. Each
/// profiled rank writes a Chrome trace and a summary of where the time went
/// (docs/trainer-config.md, "Profiling"). This header does not include
/// LibTorch: the summary is plain arithmetic on events.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/Support/Status.h"

namespace torch::autograd::profiler {
struct ProfilerResult;
}

namespace nnsc::rt {

/// One event of a profile, in nanoseconds on the host clock.
struct ProfiledEvent {
  std::string name;
  uint64_t thread = 0; ///< host thread, or the stream of a device event
  int64_t startNs = 0;
  int64_t durationNs = 0;
  bool onDevice = false;  ///< a GPU kernel, copy or fill (Kineto's activities)
  bool userScope = false; ///< a phase nnsc marks (RECORD_USER_SCOPE)
  bool memory = false;    ///< an allocation (bytes > 0) or free (bytes < 0)
  int64_t bytes = 0;
  int deviceIndex = -1;
  std::string shapes; ///< the inputs' sizes, "[[8, 64], [64]]", when recorded
};

/// Totals of the events of one name.
struct ProfileRow {
  std::string name;
  int64_t calls = 0;
  int64_t totalNs = 0; ///< summed durations
  int64_t selfNs = 0;  ///< less the time of the events nested directly inside
};

/// Per-name totals, largest self time first (ties by name). `device` false:
/// host operators (user scopes and memory events left out; nesting is
/// found per thread, so an operator's self time excludes the operators it
/// called); true: device events, whose self time is their duration.
std::vector<ProfileRow> summarizeEvents(const std::vector<ProfiledEvent> &events, bool device);

/// nnsc's phases: one row per user-scope name, `nnsc::step#N` counted as
/// `nnsc::step`, in order of first appearance.
std::vector<ProfileRow> summarizePhases(const std::vector<ProfiledEvent> &events);

/// Nanoseconds during which at least one device event ran.
int64_t deviceBusyNs(const std::vector<ProfiledEvent> &events);

/// The summary tables: phases per step, the `top` host operators by self
/// time, and on a device the `top` kernels and the device's busy share of
/// the profiled steps (from the first step's start to the end of the last
/// step or of its last kernel, whichever is later).
std::string formatProfileSummary(const std::vector<ProfiledEvent> &events, int64_t steps,
                                 int64_t top);

/// The events that belong to the profiled steps' summary: drops the device
/// copies of host scopes (Kineto's GPU user annotations span a step's
/// first to last kernel, not GPU work) and host events that start after the
/// last `nnsc::step#N` scope ends (the profiler's own wait for the device).
std::vector<ProfiledEvent> profiledSteps(std::vector<ProfiledEvent> events);

/// A Chrome trace (chrome://tracing, Perfetto): complete events for the
/// operators and phases, instant events for memory, `rank` as the process.
std::string chromeTrace(const std::vector<ProfiledEvent> &events, int rank);

/// Runs LibTorch's profiler over the steps of a ProfileConfig on one rank.
class StepProfiler {
public:
  /// `cudaDevice` < 0: cpu. The profiler starts at the first profiled step
  /// this run reaches (a resume inside the range profiles the rest of it).
  StepProfiler(const ProfileConfig &config, int rank, int cudaDevice);
  ~StepProfiler();
  StepProfiler(const StepProfiler &) = delete;
  StepProfiler &operator=(const StepProfiler &) = delete;

  /// Before step `step` (1-based): at the first profiled step, waits for
  /// the device (earlier steps' kernels stay out) and starts profiling.
  void beforeStep(int64_t step);
  /// After step `step`'s training (before its validation or checkpoint): at
  /// the last profiled step waits for the device and stops.
  void afterStep(int64_t step);
  /// Once stopped: writes `rank{r}.pt.trace.json` and `rank{r}.summary.txt`
  /// under the config's dir and prints the summary to `out` when non-null.
  /// True when it wrote them now.
  Expected<bool> write(std::ostream *out);

  /// True between the start of the first profiled step and the stop.
  bool recording() const { return running_; }
  /// The trace this rank writes.
  std::string tracePath() const;

private:
  ProfileConfig config_;
  int rank_;
  int cudaDevice_;
  bool running_ = false;
  bool done_ = false;
  std::unique_ptr<torch::autograd::profiler::ProfilerResult> result_; ///< stopped, not written
  int64_t firstStep_ = 0;
};

} // namespace nnsc::rt
