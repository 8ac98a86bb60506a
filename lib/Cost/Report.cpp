#include "nnsc/Cost/Report.h"

#include <algorithm>

#include <fmt/format.h>

namespace nnsc::cost {

std::string formatBytes(double bytes) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return fmt::format("{} B", static_cast<int64_t>(bytes));
  int u = -1;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

std::string formatSeconds(double s) {
  if (s < 1e-3)
    return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1)
    return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

std::string groupDigits(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

void printMemory(const std::vector<DeviceMemory> &memory, const MemoryOptions &options,
                 double capacity, std::ostream &os) {
  bool pipelined = std::any_of(memory.begin(), memory.end(),
                               [](const DeviceMemory &m) { return m.inFlight > 1; });
  os << fmt::format("memory per device (estimate: {} {}, zero {}; activations saved for "
                    "backward of {}):\n",
                    precisionName(options.precision), optimizerName(options.optimizer),
                    options.zero,
                    pipelined ? "the micro-batches a pipeline stage holds at once"
                              : "one micro-batch");
  for (const DeviceMemory &m : memory) {
    os << fmt::format("  device {}: params {} ({} elements), grads {}, optimizer {}, "
                      "activations {}, transient {}; total {}",
                      m.device, formatBytes(m.paramBytes),
                      groupDigits(static_cast<int64_t>(m.paramElements)), formatBytes(m.gradBytes),
                      formatBytes(m.optimizerBytes),
                      formatBytes(m.activationBytes) +
                          (m.inFlight > 1 ? fmt::format(" ({} micro-batches in flight)", m.inFlight)
                                          : ""),
                      formatBytes(m.transientBytes), formatBytes(m.total()));
    if (capacity > 0)
      os << fmt::format(" of {} ({:.1f}%){}", formatBytes(capacity), 100 * m.total() / capacity,
                        m.total() > capacity ? " -- does not fit" : "");
    os << '\n';
  }
}

void printStepTime(const std::vector<StepBreakdown> &steps, const DeviceSpec &device,
                   std::ostream &os) {
  if (steps.empty())
    return;
  os << fmt::format("step time per device (estimate on {}, {} micro-batch{}):\n", device.name,
                    steps.front().microBatches, steps.front().microBatches == 1 ? "" : "es");
  double slowest = 0;
  for (const StepBreakdown &s : steps) {
    os << fmt::format("  device {}: forward {} + comm {}, backward {} + comm {} (per "
                      "micro-batch{}); grad all-reduce {} in {} bucket{}, {} exposed; optimizer "
                      "{}; {}step {}\n",
                      s.device, formatSeconds(s.forwardCompute), formatSeconds(s.forwardComm),
                      formatSeconds(s.backwardCompute), formatSeconds(s.backwardComm),
                      s.paramGather > 0 ? fmt::format(", ZeRO-3 parameter gathers {}",
                                                      formatSeconds(s.paramGather))
                                        : "",
                      formatSeconds(s.gradReduce), s.buckets, s.buckets == 1 ? "" : "s",
                      formatSeconds(s.gradReduceExposed), formatSeconds(s.optimizer),
                      s.scheduleSeconds > 0 ? fmt::format("pipeline schedule {} ({} waiting); ",
                                                          formatSeconds(s.scheduleSeconds),
                                                          formatSeconds(s.bubbleSeconds))
                                            : "",
                      formatSeconds(s.total()));
    slowest = std::max(slowest, s.total());
  }
  os << fmt::format("  predicted step time: {} (the slowest device)\n", formatSeconds(slowest));
}

} // namespace nnsc::cost
