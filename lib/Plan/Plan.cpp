#include "nnsc/Plan/Plan.h"

#include <fmt/format.h>

#include "nnsc/IR/Printer.h"
#include "nnsc/Plan/Recompute.h"

namespace nnsc::plan {

Status checkOptions(const PlanOptions &options) {
  if (!findPolicy(options.policy))
    return errorf("error: unknown policy '{}'; expected one of: {}", options.policy, policyNames());
  if (options.runtimeNgpus <= 0)
    return errorf("error: impossible --runtime-ngpus {}; expected a positive number of devices",
                  options.runtimeNgpus);
  if (options.runtimeNgpus > kMaxRuntimeNgpus)
    return errorf("error: --runtime-ngpus {} is above the limit of {} devices",
                  options.runtimeNgpus, kMaxRuntimeNgpus);
  if (options.planNgpus < 0)
    return errorf("error: impossible --plan-ngpus {}; expected a positive number of devices",
                  options.planNgpus);
  bool spansAll = options.policy == "tp" || options.policy == "data"; // planNgpus 0: all ranks
  if ((options.planNgpus > 0 || spansAll) && planDevices(options) > kMaxPlanNgpus)
    return errorf(
        "error: {} {} is above the limit of {} devices for one model copy{}",
        options.planNgpus > 0 ? "--plan-ngpus" : "--runtime-ngpus (the default plan size)",
        planDevices(options), kMaxPlanNgpus, options.planNgpus > 0 ? "" : "; pass --plan-ngpus");
  if (options.planNgpus > 0 && options.runtimeNgpus % options.planNgpus != 0)
    return errorf("error: --runtime-ngpus {} is not a multiple of --plan-ngpus {}",
                  options.runtimeNgpus, options.planNgpus);
  if (options.policy == "hybrid" && options.planNgpus == 0)
    return errorf("error: policy 'hybrid' needs --plan-ngpus T (devices of one tensor-parallel "
                  "copy); --runtime-ngpus N runs N/T copies");
  if (options.policy == "file" && options.planFile.empty())
    return errorf("error: policy 'file' needs --plan-file PLAN.yaml");
  if (!options.planFile.empty() && options.policy != "file")
    return errorf("error: --plan-file needs --policy file (got --policy {})", options.policy);
  if (options.zero < -1 || options.zero > kMaxZeroStage)
    return errorf("error: unsupported --zero {}; expected 0 (off) or 1 (optimizer states sharded "
                  "over the data-parallel copies)",
                  options.zero);
  if (options.microBatches <= 0 || options.microBatches > kMaxMicroBatches)
    return errorf("error: impossible --micro-batches {}; expected 1 to {}", options.microBatches,
                  kMaxMicroBatches);
  return Status::ok();
}

int planDevices(const PlanOptions &options) {
  return options.planNgpus > 0 ? options.planNgpus : options.runtimeNgpus;
}

uint64_t graphFingerprint(const ir::Graph &graph) {
  uint64_t h = 1469598103934665603ull; // FNV-1a offset basis
  for (unsigned char c : ir::printGraph(graph)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Expected<proto::Plan> makePlan(const ir::Graph &graph, const PlanOptions &options) {
  NNSC_RETURN_IF_ERROR(checkOptions(options));
  auto plan = findPolicy(options.policy)->make(graph, options);
  if (!plan)
    return plan.status();
  plan->set_format_version(kPlanFormatVersion);
  plan->set_graph(options.graphPath);
  plan->set_graph_fingerprint(graphFingerprint(graph));
  plan->set_micro_batches(options.microBatches);
  if (!options.recomputeModules.empty()) {
    RecomputeSelector classes;
    classes.kind = RecomputeSelector::ModuleClass;
    classes.patterns = options.recomputeModules;
    NNSC_RETURN_IF_ERROR(assignRecomputeGroups(graph, {classes}, *plan));
  }
  if (options.zero >= 0) // a plan file's own `zero` was checked against it
    plan->set_zero(options.zero);
  Status st = validatePlan(*plan, graph);
  if (!st)
    return Status::internal(
        fmt::format("error: policy '{}' made an invalid plan: {}", options.policy, st.message()));
  return plan;
}

} // namespace nnsc::plan
