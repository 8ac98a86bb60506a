// The data policy: the batch dim of the graph inputs split over the plan's
// devices, and every op split along the identifier that carries it.
#include <fmt/format.h>

#include "Policies.h"
#include "SplitTracker.h"
#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

namespace {

// Every graph input with dims is fed split along dim 0.
Status splitInputs(const ir::Graph &graph, int n, proto::Plan &plan, SplitTracker &tracker) {
  for (int64_t id : graph.inputs) {
    const ir::Tensor &t = graph.tensor(id);
    if (t.shape.empty())
      continue;
    if (t.shape[0] % n != 0)
      return errorf("error: policy 'data': the batch dim of input '{}' (dim 0 of {}) does not "
                    "split into {} parts",
                    t.name, ir::shapeString(t.shape), n);
    proto::InputPlan *in = plan.add_inputs();
    in->set_tensor(id);
    in->set_dim(0);
    in->set_num(n);
    tracker.setInput(id, 0, n);
  }
  return Status::ok();
}

} // namespace

Expected<proto::Plan> makeDataSplit(const ir::Graph &graph, const PlanOptions &options) {
  int n = planDevices(options);
  proto::Plan plan = newPlan("data", n, options.runtimeNgpus);
  SplitTracker tracker(graph);
  if (n > 1)
    NNSC_RETURN_IF_ERROR(splitInputs(graph, n, plan, tracker));
  std::vector<int> devices = firstDevices(n);
  for (const ir::Node &node : graph.nodes()) {
    auto np = followInputs(graph, node, tracker, devices, "data");
    NNSC_RETURN_IF_ERROR(addNodePlan(
        graph, node, np ? *np : replicateNode(node, devices, "data: no batch dim"), plan, tracker));
  }
  return plan;
}

} // namespace nnsc::plan
