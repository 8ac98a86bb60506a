#pragma once
/// Making a parallel plan for a traced graph: the policy registry and the
/// checks every plan must pass, whichever policy wrote it.
///
/// A plan (proto::Plan, plan.pb) says for every forward node how it is split
/// along one of its annotated dimensions and which plan devices run the
/// parts; `runtime_ngpus / plan_ngpus` copies of that plan train data-parallel.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// Current plan.pb format version, written into every plan.
constexpr uint32_t kPlanFormatVersion = 1;

/// Limits checked before any work: the largest clusters trained today have
/// ~10^5 devices and one model copy spans at most a few hundred (tp 8 x pp 64),
/// so a larger count is a typo, and planning it would run for hours.
constexpr int kMaxRuntimeNgpus = 1 << 17;
constexpr int kMaxPlanNgpus = 4096;
constexpr int kMaxMicroBatches = 1 << 20;
/// The highest ZeRO stage nnsc-run implements (1: optimizer states sharded,
/// 2: gradients too).
constexpr int kMaxZeroStage = 3;

/// What a policy is asked to do.
struct PlanOptions {
  std::string policy = "dp"; ///< a name from policyNames()
  int runtimeNgpus = 1;      ///< total ranks at run time, >= 1
  /// Devices one model copy spans (tp, data, hybrid, file); 0 = the policy's
  /// default (runtimeNgpus for tp and data; the plan file's, else
  /// runtimeNgpus, for file). Must divide runtimeNgpus.
  int planNgpus = 0;
  int microBatches = 1;  ///< micro-batches per optimizer step, >= 1
  std::string graphPath; ///< recorded in the plan (where the graph came from)
  /// tp / hybrid: choose among the splittable identifiers at random with
  /// this seed instead of taking the first.
  std::optional<uint64_t> seed;
  std::string planFile; ///< file policy: the user plan (YAML, docs/plan-files.md)
  /// Module classes whose every instance is a recompute group of its own
  /// (--recompute-modules Block,LlamaDecoderLayer; plan/Recompute.h), with
  /// any policy. An error when none of them names a module of the graph.
  std::vector<std::string> recomputeModules;
  /// ZeRO stage over the data-parallel copies (docs/zero.md); -1: not given
  /// (a plan file's `zero`, else 0).
  int zero = -1;
  /// ZeRO inside blocks of runtimeNgpus / zeroNgroups consecutive ranks,
  /// replicated over the blocks (plan.proto zero_ngroups); -1: not given (a
  /// plan file's `zero_ngroups`, else 1). More than 1 needs zero >= 1 and
  /// data-parallel copies divisible by it.
  int zeroNgroups = -1;
  /// The autodist policy's search (lib/AutoDist lives above Plan: it prices
  /// plans with the partition pass): the tool supplies it; policy "autodist"
  /// without it is an error.
  std::function<Expected<proto::Plan>(const ir::Graph &graph)> search;
  /// Pipeline stages (Pipeline.h): with stages > 1 the policy plans one stage
  /// of plan_ngpus / stages devices and the plan is cut into stages after it.
  /// Policy "pp" is "dp" inside every stage.
  PipelineOptions pipeline;
};

/// A policy fills in a plan for `graph`. It may assume `options` passed
/// checkOptions; the common fields (version, graph path, fingerprint, micro
/// batches) are set by makePlan afterwards.
using PolicyFn =
    std::function<Expected<proto::Plan>(const ir::Graph &graph, const PlanOptions &options)>;

struct Policy {
  std::string name;
  std::string summary; ///< one line for --help
  PolicyFn make;
};

/// Every registered policy, in the order help texts list them.
const std::vector<Policy> &policies();
/// The policy called `name`, or nullptr.
const Policy *findPolicy(const std::string &name);
/// "dp" / "dp, tp, ..." for error messages.
std::string policyNames();

/// Checks option values that no policy can work with (ngpus <= 0, unknown
/// policy, plan ngpus not dividing runtime ngpus, a policy missing its
/// option). Errors read "error: ..." and name the bad value.
Status checkOptions(const PlanOptions &options);

/// The plan_ngpus a tp/data/hybrid policy uses: options.planNgpus, or
/// options.runtimeNgpus when 0.
int planDevices(const PlanOptions &options);

/// Runs the chosen policy, stamps the common fields and validates the result
/// against `graph` (validatePlan), so a returned plan is always usable.
Expected<proto::Plan> makePlan(const ir::Graph &graph, const PlanOptions &options);

/// A stable 64-bit fingerprint of a graph (FNV-1a over its text form), stored
/// in plans to catch a plan used with another graph.
uint64_t graphFingerprint(const ir::Graph &graph);

/// Checks what a plan must satisfy on its own: a known format version,
/// plan_ngpus >= 1, runtime_ngpus a positive multiple of it, micro_batches >= 1.
Status checkPlanEnvelope(const proto::Plan &plan);

/// ZeRO in blocks (zero_ngroups > 1) needs ZeRO on and whole data-parallel
/// copies in every block: copies (runtime_ngpus / plan_ngpus) divisible by
/// zero_ngroups. The message names both counts, without a prefix.
Status checkZeroNgroups(const proto::Plan &plan);
/// ZeRO-3 gathers around recompute groups: a plan of zero 3 must have some.
Status checkZero3(const proto::Plan &plan);

/// Checks that `plan` fits `graph`: format version, device counts
/// (runtime_ngpus a positive multiple of plan_ngpus), one NodePlan per node
/// in node order, devices in range and stages that exist, and every
/// partition splittable under the node's annotations (ops::splitEffect).
/// Errors are one line without location; callers prefix the file.
Status validatePlan(const proto::Plan &plan, const ir::Graph &graph);

} // namespace nnsc::plan
