// The exact prices of a found plan (Internal.h: price), on the whole graph or
// on a few of its repeated layers.
//
// Pricing partitions the plan and runs the step and memory models over
// every op of every device: its time grows with depth, while the solve does
// not (the layers are folded). Where the plan cuts its repeated layers in a
// few runs of alike instances (every layer the same; or the first k
// recomputed and the rest not), what each more instance of a run adds is
// the same: its ops' compute and collectives, its weights, gradients and
// optimizer states, its saved activations. So the plan is priced on probe
// graphs that keep two instances of each run, and once more per long run
// with a third: the difference is one instance's share, counted for the
// instances left out. The working set on top (the largest op's transient)
// is a maximum over ops that every kept instance already shows.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "Internal.h"
#include "Problem.h"
#include "Repeats.h"
#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Transform/Partition.h"
#include "nnsc/Transform/StepCost.h"

namespace nnsc::autodist {

namespace {

// Every device's step and memory.
struct Prices {
  std::vector<cost::StepBreakdown> steps;
  std::vector<double> memory;
};

Expected<Prices> priceWhole(const ir::Graph &graph, const proto::Plan &plan,
                            const cost::Cluster &cluster, const Options &options,
                            RelayoutCache &cache) {
  transform::PartitionOptions partition;
  partition.search.cost = transform::tableRvdCost(cluster);
  partition.search.cache = cache.plans(); // every layer's adapters searched once
  auto pg = transform::partitionGraph(graph, plan, partition);
  if (!pg)
    return pg.status();
  cost::StepOptions step;
  step.microBatches = plan.micro_batches();
  step.memory = options.memory;
  step.memory.zero = plan.zero();
  step.memory.dpSize = plan.runtime_ngpus() / plan.plan_ngpus();
  auto steps = transform::estimateStep(graph, plan, *pg, cluster, step);
  if (!steps)
    return steps.status();
  Prices p;
  p.steps = steps.take();
  for (const cost::DeviceMemory &m : plan::estimateMemory(graph, plan, step.memory))
    p.memory.push_back(m.total());
  return p;
}

Priced summarize(const Prices &prices) {
  Priced p;
  for (const cost::StepBreakdown &b : prices.steps)
    if (b.total() > p.step) {
      p.step = b.total();
      p.bubble = b.bubbleSeconds;
    }
  p.deviceMemory = prices.memory;
  for (double m : prices.memory)
    p.memory = std::max(p.memory, m);
  return p;
}

// What a node's plan says, less its node id, rule and recompute group's
// number: instances with equal cuts are alike.
std::string cutOf(const proto::NodePlan &np) {
  proto::NodePlan c = np;
  c.clear_node();
  c.clear_rule();
  c.set_recompute_group(np.recompute_group() >= 0 ? 0 : -1);
  return c.SerializeAsString();
}

// A run of alike instances: [first, first + length).
struct Run {
  size_t first = 0;
  size_t length = 0;
};

constexpr size_t kKept = 2; // instances of a long run each probe keeps

// The runs of alike instances, or none where the plan cannot be priced by
// probes: pipelined, nodes out of order, an instance cut unlike itself
// (recomputed in part), or a recompute group that spans instances.
std::vector<Run> runsOf(const proto::Plan &plan,
                        const std::vector<std::pair<size_t, size_t>> &ranges) {
  if (ranges.size() <= kKept + 1 || plan::physicalStages(plan) > 1 || plan.stages_size() > 1)
    return {};
  for (int k = 0; k < plan.nodes_size(); ++k)
    if (plan.nodes(k).node() != k)
      return {};
  std::map<int, size_t> groupOwner; // recompute group -> the instance holding it
  std::vector<std::string> signature;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto [begin, end] = ranges[i];
    int group = plan.nodes(static_cast<int>(begin)).recompute_group();
    std::string sig;
    for (size_t k = begin; k < end; ++k) {
      const proto::NodePlan &np = plan.nodes(static_cast<int>(k));
      if (np.recompute_group() != group)
        return {};
      sig += cutOf(np);
    }
    if (group >= 0 && !groupOwner.emplace(group, i).second)
      return {};
    signature.push_back(std::move(sig));
  }
  // A group of an instance must not reach outside it.
  for (int k = 0; k < plan.nodes_size(); ++k) {
    auto it = groupOwner.find(plan.nodes(k).recompute_group());
    if (it == groupOwner.end())
      continue;
    const auto [begin, end] = ranges[it->second];
    if (static_cast<size_t>(k) < begin || static_cast<size_t>(k) >= end)
      return {};
  }
  std::vector<Run> runs;
  for (size_t i = 0; i < signature.size(); ++i)
    if (runs.empty() || signature[i] != signature[runs.back().first])
      runs.push_back({i, 1});
    else
      ++runs.back().length;
  bool anyLong = std::any_of(runs.begin(), runs.end(),
                             [](const Run &r) { return r.length > kKept + 1; });
  return anyLong ? runs : std::vector<Run>{};
}

// The graph and plan with only the instances `keep` says of the repeated
// block: a node that read a tensor written in a left-out instance reads the
// same tensor of the last kept instance before it.
struct Probe {
  ir::Graph graph;
  proto::Plan plan;
};

Probe probeOf(const ir::Graph &graph, const proto::Plan &plan,
              const std::vector<std::pair<size_t, size_t>> &ranges,
              const std::vector<bool> &keep) {
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
  p.graph.tensors() = graph.tensors();
  p.plan = plan;
  p.plan.clear_nodes();
  std::map<int, int> groups; // recompute group -> its number in the probe
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (instanceOf[k] >= 0 && !keep[static_cast<size_t>(instanceOf[k])])
      continue;
    ir::Node n = nodes[k];
    fix(n.inputs);
    p.graph.nodes().push_back(std::move(n));
    proto::NodePlan np = plan.nodes(static_cast<int>(k));
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
    if (used[t])
      renumbered[t] = static_cast<int64_t>(next++);
  for (proto::InputPlan &in : *p.plan.mutable_inputs())
    in.set_tensor(renumbered[static_cast<size_t>(in.tensor())]);
  p.graph.compact(used);
  return p;
}

// t += times * (b - a), field by field: what `times` more instances add,
// where b priced one instance more than a.
void addInstances(cost::StepBreakdown &t, const cost::StepBreakdown &a,
                  const cost::StepBreakdown &b, double times) {
  auto add = [&](double &field, double x, double y) {
    field = std::max(0.0, field + times * (y - x));
  };
  add(t.forwardCompute, a.forwardCompute, b.forwardCompute);
  add(t.backwardCompute, a.backwardCompute, b.backwardCompute);
  add(t.forwardComm, a.forwardComm, b.forwardComm);
  add(t.backwardComm, a.backwardComm, b.backwardComm);
  add(t.gradReduce, a.gradReduce, b.gradReduce);
  add(t.gradReduceExposed, a.gradReduceExposed, b.gradReduceExposed);
  add(t.optimizer, a.optimizer, b.optimizer);
  t.buckets += static_cast<int>(times * (b.buckets - a.buckets));
}

} // namespace

const std::vector<std::pair<size_t, size_t>> &RelayoutCache::layerRanges(const ir::Graph &graph) {
  if (rangesOf_ != &graph) {
    rangesOf_ = &graph;
    layerRanges_ = instanceRanges(graph, repeatedBlocks(graph));
  }
  return layerRanges_;
}

Expected<Priced> price(const ir::Graph &graph, const proto::Plan &plan,
                       const cost::Cluster &cluster, const Options &options,
                       RelayoutCache &cache) {
  NNSC_RETURN_IF_ERROR(plan::validatePlan(plan, graph));
  const auto &ranges = cache.layerRanges(graph);
  std::vector<Run> runs;
  if (!options.priceWholeGraph && !ranges.empty())
    runs = runsOf(plan, ranges);
  if (runs.empty()) {
    auto whole = priceWhole(graph, plan, cluster, options, cache);
    if (!whole)
      return whole.status();
    return summarize(*whole);
  }

  // The base probe keeps kKept instances of each long run; one more probe
  // per long run keeps one instance more of it.
  std::vector<bool> keep(ranges.size(), false);
  for (const Run &r : runs)
    for (size_t i = 0; i < r.length && (r.length <= kKept + 1 || i < kKept); ++i)
      keep[r.first + i] = true;
  Probe base = probeOf(graph, plan, ranges, keep);
  auto basePrices = priceWhole(base.graph, base.plan, cluster, options, cache);
  if (!basePrices)
    return basePrices.status();
  Prices total = *basePrices;
  for (const Run &r : runs) {
    if (r.length <= kKept + 1)
      continue;
    std::vector<bool> more = keep;
    more[r.first + kKept] = true;
    Probe probe = probeOf(graph, plan, ranges, more);
    auto one = priceWhole(probe.graph, probe.plan, cluster, options, cache);
    if (!one)
      return one.status();
    if (one->steps.size() != total.steps.size() || one->memory.size() != total.memory.size())
      return errorf("internal error: autodist's probes of {} priced {} and {} devices",
                    graph.name, total.steps.size(), one->steps.size());
    const double left = static_cast<double>(r.length - kKept); // instances not in the base
    for (size_t d = 0; d < total.steps.size(); ++d)
      addInstances(total.steps[d], basePrices->steps[d], one->steps[d], left);
    for (size_t d = 0; d < total.memory.size(); ++d)
      total.memory[d] += left * (one->memory[d] - basePrices->memory[d]);
  }
  Priced probed = summarize(total);
  if (std::getenv("NNSC_AUTODIST_DEBUG")) {
    auto whole = priceWhole(graph, plan, cluster, options, cache);
    if (whole) {
      Priced w = summarize(*whole);
      std::fprintf(stderr, "probes: %zu runs, step %.9g s (whole %.9g), memory %.9g (whole %.9g)\n",
                   runs.size(), probed.step, w.step, probed.memory, w.memory);
    }
  }
  return probed;
}

} // namespace nnsc::autodist
