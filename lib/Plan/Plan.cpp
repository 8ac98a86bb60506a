#include "nnsc/Plan/Plan.h"

#include <fmt/format.h>

#include "nnsc/IR/Printer.h"
#include "nnsc/Plan/Recompute.h"
#include "Policies.h"

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
    return errorf(
        "error: unsupported --zero {}; expected 0 (off), 1 (optimizer states sharded "
        "over the data-parallel copies), 2 (gradients too) or 3 (parameters too, gathered around "
        "each recompute group)",
        options.zero);
  if (options.zeroNgroups == 0 || options.zeroNgroups < -1 ||
      options.zeroNgroups > kMaxRuntimeNgpus)
    return errorf("error: impossible --zero-ngroups {}; expected a positive number of blocks",
                  options.zeroNgroups);
  NNSC_RETURN_IF_ERROR(checkPipelineOptions(options.pipeline));
  if (options.zero >= 2 && options.pipeline.stages > 1)
    return errorf("error: --zero {} with --pipeline-stages {}: ZeRO-{} reduce-scatters each "
                  "micro-batch's gradients, a pipeline accumulates them over its schedule; use "
                  "--zero 1",
                  options.zero, options.pipeline.stages, options.zero);
  if (options.policy == "pp" && options.pipeline.stages < 2)
    return errorf("error: policy 'pp' needs --pipeline-stages S (2 or more)");
  if (options.pipeline.stages > 1 && options.policy == "autodist")
    return errorf("error: policy 'autodist' takes --pipeline auto|S (it chooses the stages' "
                  "devices and cuts), not --pipeline-stages");
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

namespace {

// The policy over one stage's devices (plan_ngpus / S of them, runtime_ngpus
// / S ranks), then cut into stages.
Expected<proto::Plan> makePipelined(const ir::Graph &graph, const PlanOptions &options) {
  const int S = options.pipeline.stages;
  int total = options.policy == "pp" ? (options.planNgpus > 0 ? options.planNgpus : S)
                                     : planDevices(options);
  if (total % S != 0 || options.runtimeNgpus % total != 0)
    return errorf("error: {} devices per model copy do not split into --pipeline-stages {} "
                  "(runtime {} devices); the plan devices must be a multiple of the stages and "
                  "divide the runtime devices",
                  total, S, options.runtimeNgpus);
  PlanOptions base = options;
  base.policy = options.policy == "pp" ? "dp" : options.policy;
  base.planNgpus = total / S;
  base.runtimeNgpus = options.runtimeNgpus / S;
  if (base.policy == "dp" && base.planNgpus != 1)
    return errorf("error: policy '{}' runs each stage on one device; --plan-ngpus must equal "
                  "--pipeline-stages {} (got {})",
                  options.policy, S, total);
  auto plan = findPolicy(base.policy)->make(graph, base);
  if (!plan)
    return plan.status();
  NNSC_RETURN_IF_ERROR(applyPipeline(graph, options.pipeline, *plan));
  plan->set_policy(options.policy);
  if (options.pipeline.schedule == "interleaved" && options.microBatches % S != 0)
    return errorf("error: the interleaved schedule needs --micro-batches divisible by "
                  "--pipeline-stages {} (got {})",
                  S, options.microBatches);
  return plan;
}

} // namespace

Expected<proto::Plan> makePlan(const ir::Graph &graph, const PlanOptions &options) {
  NNSC_RETURN_IF_ERROR(checkOptions(options));
  bool fileStages = options.policy == "file" && planFileHasStages(options.planFile);
  auto plan = options.pipeline.stages > 1 && !fileStages
                  ? makePipelined(graph, options)
                  : findPolicy(options.policy)->make(graph, options);
  if (!plan)
    return plan.status();
  plan->set_format_version(kPlanFormatVersion);
  plan->set_graph(options.graphPath);
  plan->set_graph_fingerprint(graphFingerprint(graph));
  if (plan->micro_batches() == 0) // autodist (--global-batch) and plan files may choose
    plan->set_micro_batches(options.microBatches);
  if (!options.recomputeModules.empty()) {
    RecomputeSelector classes;
    classes.kind = RecomputeSelector::ModuleClass;
    classes.patterns = options.recomputeModules;
    NNSC_RETURN_IF_ERROR(assignRecomputeGroups(graph, {classes}, *plan));
  }
  if (options.zero >= 0) // a plan file's own `zero` was checked against it
    plan->set_zero(options.zero);
  if (options.zeroNgroups >= 0) // so was its `zero_ngroups`
    plan->set_zero_ngroups(options.zeroNgroups);
  if (Status groups = checkZeroNgroups(*plan); !groups)
    return Status::error("error: " + groups.message());
  if (Status units = checkZero3(*plan); !units)
    return Status::error("error: " + units.message());
  Status st = validatePlan(*plan, graph);
  if (!st)
    return Status::internal(
        fmt::format("error: policy '{}' made an invalid plan: {}", options.policy, st.message()));
  return plan;
}

} // namespace nnsc::plan
