// The tp and hybrid policies: every op split along an identifier its
// annotation allows, chosen blindly (first that divides, or seeded random).
#include <random>

#include "Policies.h"
#include "SplitTracker.h"
#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

namespace {

// The identifiers of `node` that split into `n` parts, in annotation order.
std::vector<std::string> divisibleIdents(const ir::Graph &graph, const ir::Node &node, int n) {
  std::vector<std::string> out;
  auto bound = bindNode(graph, node);
  if (!bound)
    return out;
  for (const std::string &id : ops::splittableIdents(*bound))
    if (ops::splitEffect(*bound, id, n))
      out.push_back(id);
  return out;
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
