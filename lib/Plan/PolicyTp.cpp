// The tp and hybrid policies: every op split along an identifier its
// annotation allows: one that cuts the op's weight when it has one (spatial
// dims before reduction dims), else any; the first that divides, or a seeded
// pick among them.
#include <random>

#include "Policies.h"
#include "SplitTracker.h"
#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

namespace {

// True when splitting along `effect` cuts a parameter of `node` (tensor
// parallelism proper) rather than only activations.
bool splitsParameter(const ir::Graph &graph, const ir::Node &node, const ops::SplitEffect &effect) {
  for (size_t i = 0; i < node.inputs.size() && i < effect.inputDims.size(); ++i)
    if (effect.inputDims[i] >= 0 && graph.tensor(node.inputs[i]).kind == ir::TensorKind::Param)
      return true;
  return false;
}

// The identifiers of `node` that split into `n` parts: those that cut a
// weight first (spatial before reduction), then the rest, each group in
// annotation order.
std::vector<std::string> divisibleIdents(const ir::Graph &graph, const ir::Node &node, int n) {
  std::vector<std::string> weightSpatial, weightReduce, others;
  auto bound = bindNode(graph, node);
  if (!bound)
    return others;
  for (const std::string &id : ops::splittableIdents(*bound)) {
    auto effect = ops::splitEffect(*bound, id, n);
    if (!effect || !checkSplitOutputs(graph, node, *effect, id).isOk())
      continue;

    if (!splitsParameter(graph, node, *effect))
      others.push_back(id);
    else
      (effect->valueSplit ? weightReduce : weightSpatial).push_back(id);
  }
  if (!weightSpatial.empty() || !weightReduce.empty())
    others.clear(); // an op with a weight is split on the weight
  weightSpatial.insert(weightSpatial.end(), weightReduce.begin(), weightReduce.end());
  weightSpatial.insert(weightSpatial.end(), others.begin(), others.end());
  return weightSpatial;
}

// One choice among `count` candidates: the first, or a seeded pick. The
// engine's raw output is portable (unlike std distributions).
size_t pick(size_t count, std::optional<std::mt19937_64> &rng) {
  return rng ? static_cast<size_t>((*rng)() % count) : 0;
}

Expected<proto::Plan> makeSplitEverywhere(const ir::Graph &graph, const PlanOptions &options,
                                          const std::string &policy) {
  int n = planDevices(options);
  proto::Plan plan = newPlan(policy, n, options.runtimeNgpus);
  SplitTracker tracker(graph);
  std::optional<std::mt19937_64> rng;
  if (options.seed)
    rng.emplace(*options.seed);
  std::vector<int> devices = firstDevices(n);
  for (const ir::Node &node : graph.nodes()) {
    std::vector<std::string> ids =
        n > 1 ? divisibleIdents(graph, node, n) : std::vector<std::string>{};
    proto::NodePlan np = replicateNode(node, devices, policy);
    if (!ids.empty()) {
      auto split = splitNodeByIdent(graph, node, ids[pick(ids.size(), rng)], devices, policy);
      if (!split)
        return Status::internal(split.status().message());
      np = split.take();
    }
    NNSC_RETURN_IF_ERROR(addNodePlan(graph, node, std::move(np), plan, tracker));
  }
  return plan;
}

} // namespace

Expected<proto::Plan> makeTensorParallel(const ir::Graph &graph, const PlanOptions &options) {
  return makeSplitEverywhere(graph, options, "tp");
}

Expected<proto::Plan> makeHybrid(const ir::Graph &graph, const PlanOptions &options) {
  return makeSplitEverywhere(graph, options, "hybrid");
}

} // namespace nnsc::plan
