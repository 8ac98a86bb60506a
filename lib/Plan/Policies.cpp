// The policy registry. Each policy is a function from a graph to a plan;
// adding one (pp, autodist) means adding an entry here.
#include <fmt/format.h>

#include "Policies.h"
#include "SplitTracker.h"
#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

/// Data parallelism: one model copy per rank. The plan spans one device that
/// runs every node whole; runtime_ngpus copies of it train on disjoint
/// micro-batches and average their gradients.
Expected<proto::Plan> makeDataParallel(const ir::Graph &graph, const PlanOptions &options) {
  proto::Plan plan = newPlan("dp", 1, options.runtimeNgpus);
  for (const ir::Node &node : graph.nodes())
    *plan.add_nodes() = replicateNode(node, {0}, "");
  return plan;
}

const std::vector<Policy> &policies() {
  static const std::vector<Policy> all = {
      {"dp", "data parallel: every rank runs the whole model on its own micro-batches",
       makeDataParallel},
      {"pp",
       "pipeline parallel: --pipeline-stages S stages cut at layers by cost, one device each "
       "(--schedule 1f1b|gpipe|interleaved)",
       makeDataParallel},
      {"tp",
       "tensor parallel: every op split along its first identifier that divides by the "
       "plan's devices (--seed: a random one)",
       makeTensorParallel},
      {"data", "every op split along the batch dim of the inputs, followed through annotations",
       makeDataSplit},
      {"hybrid", "tp over --plan-ngpus T devices, runtime_ngpus / T data-parallel copies",
       makeHybrid},
      {"autodist",
       "search the plan under a memory limit against the cost model (--device or --cluster; "
       "docs/autodist.md)",
       [](const ir::Graph &graph, const PlanOptions &options) -> Expected<proto::Plan> {
         if (!options.search)
           return Status::error("error: policy 'autodist' needs the cost model: run it from "
                                "nnsc-plan with --device or --cluster");
         return options.search(graph);
       }},
      {"file", "a user plan file (--plan-file PLAN.yaml): rules by module path, op or node",
       makeFromPlanFile},
  };
  return all;
}

const Policy *findPolicy(const std::string &name) {
  for (const Policy &p : policies())
    if (p.name == name)
      return &p;
  return nullptr;
}

std::string policyNames() {
  std::string names;
  for (const Policy &p : policies())
    names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

} // namespace nnsc::plan
