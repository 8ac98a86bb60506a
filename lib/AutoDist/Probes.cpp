// Probe graphs (Probes.h).
#include "Probes.h"

#include <map>

#include "Problem.h"

namespace nnsc::autodist {

Probe probeOf(const ir::Graph &graph, const proto::Plan *plan,
              const std::vector<std::pair<size_t, size_t>> &ranges, const std::vector<bool> &keep,
              const proto::Plan *shell) {
  const auto &nodes = graph.nodes();
  std::vector<int> instanceOf(nodes.size(), -1);
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t k = ranges[i].first; k < ranges[i].second; ++k)
      instanceOf[k] = static_cast<int>(i);
  // The kept instance a left-out one stands for: the last kept before it.
  std::vector<size_t> standIn(ranges.size());
  for (size_t i = 0, last = 0; i < ranges.size(); ++i) {
    if (keep[i])
      last = i;
    standIn[i] = last;
  }
  // Each tensor written in a left-out instance -> its stand-in's.
  std::vector<int64_t> mapTo(graph.tensors().size());
  for (size_t t = 0; t < mapTo.size(); ++t)
    mapTo[t] = static_cast<int64_t>(t);
  for (size_t k = 0; k < nodes.size(); ++k) {
    int i = instanceOf[k];
    if (i < 0 || keep[static_cast<size_t>(i)])
      continue;
    size_t s = standIn[static_cast<size_t>(i)];
    const ir::Node &mirror = nodes[ranges[s].first + (k - ranges[static_cast<size_t>(i)].first)];
    for (size_t q = 0; q < nodes[k].outputs.size(); ++q)
      mapTo[static_cast<size_t>(nodes[k].outputs[q])] = mirror.outputs[q];
  }
  auto fix = [&](std::vector<int64_t> &ids) {
    for (int64_t &id : ids)
      id = mapTo[static_cast<size_t>(id)];
  };

  Probe p;
  p.graph.name = graph.name;
  p.graph.source = graph.source;
  p.graph.inputs = graph.inputs;
  p.graph.outputs = graph.outputs;
  p.graph.lossOutput = graph.lossOutput;
  p.graph.weightsWritten = graph.weightsWritten;
  p.graph.stateUpdates = graph.stateUpdates;
  if (plan) {
    if (shell) {
      p.plan = *shell;
    } else {
      p.plan = *plan;
      p.plan.clear_nodes();
    }
  }
  std::map<int, int> groups; // recompute group -> its number in the probe
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (instanceOf[k] >= 0 && !keep[static_cast<size_t>(instanceOf[k])])
      continue;
    ir::Node n = nodes[k];
    fix(n.inputs);
    p.graph.nodes().push_back(std::move(n));
    p.source.push_back(k);
    if (!plan)
      continue;
    proto::NodePlan np = plan->nodes(static_cast<int>(k));
    np.set_node(static_cast<int64_t>(p.plan.nodes_size()));
    if (np.recompute_group() >= 0)
      np.set_recompute_group(
          groups.emplace(np.recompute_group(), static_cast<int>(groups.size())).first->second);
    *p.plan.add_nodes() = std::move(np);
  }
  fix(p.graph.outputs);
  for (ir::StateUpdate &u : p.graph.stateUpdates)
    u.value = mapTo[static_cast<size_t>(u.value)];

  // Only the tensors the probe still uses, renumbered.
  std::vector<bool> used(graph.tensors().size(), false);
  auto use = [&](const std::vector<int64_t> &ids) {
    for (int64_t id : ids)
      used[static_cast<size_t>(id)] = true;
  };
  use(p.graph.inputs);
  use(p.graph.outputs);
  for (const ir::Node &n : p.graph.nodes()) {
    use(n.inputs);
    use(n.outputs);
  }
  for (const ir::StateUpdate &u : p.graph.stateUpdates)
    used[static_cast<size_t>(u.state)] = used[static_cast<size_t>(u.value)] = true;
  std::vector<int64_t> renumbered(used.size(), -1);
  for (size_t t = 0, next = 0; t < used.size(); ++t)
    if (used[t]) {
      renumbered[t] = static_cast<int64_t>(next++);
      p.tensorSource.push_back(static_cast<int64_t>(t));
    }
  for (proto::InputPlan &in : *p.plan.mutable_inputs())
    in.set_tensor(renumbered[static_cast<size_t>(in.tensor())]);
  for (int64_t t : p.tensorSource) {
    ir::Tensor copy = graph.tensors()[static_cast<size_t>(t)];
    copy.id = renumbered[static_cast<size_t>(t)];
    p.graph.tensors().push_back(std::move(copy));
  }
  auto renumber = [&](std::vector<int64_t> &ids) {
    for (int64_t &id : ids)
      id = renumbered[static_cast<size_t>(id)];
  };
  for (size_t k = 0; k < p.graph.nodes().size(); ++k) {
    ir::Node &n = p.graph.nodes()[k];
    n.id = static_cast<int64_t>(k);
    renumber(n.inputs);
    renumber(n.outputs);
  }
  renumber(p.graph.inputs);
  renumber(p.graph.outputs);
  for (ir::StateUpdate &u : p.graph.stateUpdates) {
    u.state = renumbered[static_cast<size_t>(u.state)];
    u.value = renumbered[static_cast<size_t>(u.value)];
  }
  return p;
}

const Probe &RelayoutCache::truncated(const ir::Graph &graph, size_t instances) {
  auto &slot = truncated_[instances];
  if (!slot) {
    const auto &ranges = layerRanges(graph);
    std::vector<bool> keep(ranges.size(), false);
    for (size_t i = 0; i < instances && i < keep.size(); ++i)
      keep[i] = true;
    slot = std::make_unique<Probe>(probeOf(graph, nullptr, ranges, keep));
  }
  return *slot;
}

} // namespace nnsc::autodist
