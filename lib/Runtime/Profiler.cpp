// StepProfiler (Profiler.h): LibTorch's profiler started and stopped around
// the profiled steps, its events turned into ProfiledEvents.
#include "nnsc/Runtime/Profiler.h"

#include <ostream>
#include <set>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include <torch/csrc/autograd/profiler_kineto.h>

#include "nnsc/Runtime/CudaMemory.h"
#include "nnsc/Support/File.h"

namespace nnsc::rt {

namespace {

namespace tp = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerState;

// LibTorch 2.x times events in nanoseconds (startNs), 1.13 in microseconds
// (startUs): whichever the event has.
template <typename E, typename = void> struct HasNs : std::false_type {};
template <typename E>
struct HasNs<E, std::void_t<decltype(std::declval<const E &>().startNs())>> : std::true_type {};

template <typename E> std::pair<int64_t, int64_t> startAndDuration(const E &e) {
  if constexpr (HasNs<E>::value)
    return {int64_t(e.startNs()), int64_t(e.durationNs())};
  else
    return {int64_t(e.startUs()) * 1000, int64_t(e.durationUs()) * 1000};
}

std::string shapesText(const tp::KinetoEvent &e) {
  if (!e.hasShapes())
    return "";
  std::string out = "[";
  for (const auto &dims : e.shapes()) {
    out += out.size() > 1 ? ", [" : "[";
    for (size_t i = 0; i < dims.size(); ++i)
      out += (i ? ", " : "") + std::to_string(dims[i]);
    out += "]";
  }
  return out + "]";
}

ProfiledEvent convert(const tp::KinetoEvent &e) {
  ProfiledEvent p;
  p.name = e.name();
  std::tie(p.startNs, p.durationNs) = startAndDuration(e);
  p.onDevice = e.deviceType() != c10::DeviceType::CPU;
  p.userScope = e.scope() == uint8_t(at::RecordScope::USER_SCOPE);
  p.memory = p.name == "[memory]";
  p.onDevice = p.onDevice && !p.memory; // a device allocation is no kernel
  p.bytes = p.memory ? e.nBytes() : 0;
  p.deviceIndex = int(e.deviceIndex());
  p.thread = p.onDevice ? uint64_t(e.deviceResourceId()) : e.startThreadId();
  p.shapes = shapesText(e);
  return p;
}

} // namespace

StepProfiler::StepProfiler(const ProfileConfig &config, int rank, int cudaDevice)
    : config_(config), rank_(rank), cudaDevice_(cudaDevice) {}

StepProfiler::~StepProfiler() {
  if (!running_)
    return;
  running_ = false;
  try {
    (void)tp::disableProfiler(); // a failed run: nothing is written
  } catch (const std::exception &) {
  }
}

std::string StepProfiler::tracePath() const {
  return fmt::format("{}/rank{}.pt.trace.json", config_.dir, rank_);
}

void StepProfiler::beforeStep(int64_t step) {
  if (running_ || result_ || done_ || !config_.enabled() || !config_.profilesRank(rank_) ||
      !config_.coversStep(step))
    return;
  tp::ProfilerConfig cfg(ProfilerState::KINETO, config_.recordShapes == "true",
                         config_.memory == "true");
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cudaDevice_ >= 0) {
    activities.insert(ActivityType::CUDA);
    synchronizeCudaDevice(cudaDevice_); // earlier steps' kernels stay out
  }
  tp::prepareProfiler(cfg, activities);
  tp::enableProfiler(cfg, activities);
  running_ = true;
  firstStep_ = step;
}

void StepProfiler::afterStep(int64_t step) {
  if (!running_ || step < config_.lastStep())
    return;
  if (cudaDevice_ >= 0)
    synchronizeCudaDevice(cudaDevice_); // the steps' kernels end inside the profile
  running_ = false;
  result_ = tp::disableProfiler();
}

Expected<bool> StepProfiler::write(std::ostream *out) {
  if (!result_)
    return false;
  std::unique_ptr<tp::ProfilerResult> result = std::move(result_);
  done_ = true;
  std::vector<ProfiledEvent> events;
  for (const tp::KinetoEvent &e : result->events())
    events.push_back(convert(e));
  events = profiledSteps(std::move(events));
  NNSC_RETURN_IF_ERROR(makeDirs(config_.dir));
  // A Kineto-enabled LibTorch writes its own trace (GPU kernels linked to
  // their launches, as torch.profiler's export); without Kineto (Debian 12's
  // build) save() refuses and nnsc writes the events it has.
  const std::string trace = tracePath();
  bool saved = false;
  try {
    result->save(trace);
    saved = true;
  } catch (const c10::Error &) {
  }
  if (!saved)
    NNSC_RETURN_IF_ERROR(writeFileAtomic(trace, chromeTrace(events, rank_)));
  const int64_t steps = config_.lastStep() - firstStep_ + 1;
  std::string summary = fmt::format("profile of rank {}, steps {}-{}: {}\n", rank_, firstStep_,
                                    config_.lastStep(), trace) +
                        formatProfileSummary(events, steps, config_.top);
  NNSC_RETURN_IF_ERROR(
      writeFileAtomic(fmt::format("{}/rank{}.summary.txt", config_.dir, rank_), summary));
  if (out)
    *out << summary << std::flush;
  return true;
}

} // namespace nnsc::rt
