// Text forms of RVD steps and plans.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nnsc/Transform/RvdSearch.h"

namespace nnsc::transform {

std::string formatRvdStep(const RvdStep &step) {
  std::string groups;
  for (const std::vector<int> &group : step.groups)
    groups += fmt::format("{}[{}]", groups.empty() ? "" : " ", fmt::join(group, ","));
  return fmt::format("{} {}->{} x{} {} => {} ({} B/device, cost {:g})", primitiveName(step.kind),
                     axisName(step.move.fromAxis), axisName(step.move.toAxis), step.move.chunks,
                     groups, step.after.str(), step.bytesPerDevice, step.cost);
}

std::string formatRvdPlan(const RvdPlan &plan) {
  std::string out = fmt::format("{} -> {}: {} step{}, cost {:g}\n", plan.producer.strWithDevices(),
                                plan.consumer.strWithDevices(), plan.steps.size(),
                                plan.steps.size() == 1 ? "" : "s", plan.cost);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    out += fmt::format("  {}. {}\n", i + 1, formatRvdStep(plan.steps[i]));
  return out;
}

} // namespace nnsc::transform
