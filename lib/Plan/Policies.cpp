// The policy registry. Each policy is a function from a graph to a plan;
// adding one (tp, pp, autodist) means adding an entry here.
#include <fmt/format.h>

#include "nnsc/Plan/Plan.h"

namespace nnsc::plan {

namespace {

/// Data parallelism: one model copy per rank. The plan spans one device that
/// runs every node whole; runtime_ngpus copies of it train on disjoint
/// micro-batches and average their gradients.
Expected<proto::Plan> makeDataParallel(const ir::Graph &graph, const PlanOptions &options) {
  proto::Plan plan;
  plan.set_policy("dp");
  plan.set_plan_ngpus(1);
  plan.set_runtime_ngpus(options.runtimeNgpus);
  proto::Stage *stage = plan.add_stages();
  stage->set_id(0);
  stage->add_devices(0);
  for (const ir::Node &node : graph.nodes()) {
    proto::NodePlan *np = plan.add_nodes();
    np->set_node(node.id);
    np->set_num(1);
    np->add_devices(0);
    np->set_stage(0);
    np->set_recompute_group(-1);
  }
  return plan;
}

} // namespace

const std::vector<Policy> &policies() {
  static const std::vector<Policy> all = {
      {"dp", "data parallel: every rank runs the whole model on its own micro-batches",
       makeDataParallel},
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
