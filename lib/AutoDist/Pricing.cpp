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
#include "Probes.h"
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

cost::StepOptions stepOptionsOf(const proto::Plan &plan, const Options &options) {
  cost::StepOptions step;
  step.microBatches = plan.micro_batches();
  step.memory = options.memory;
  step.memory.zero = plan.zero();
  step.memory.dpSize = plan.runtime_ngpus() / plan.plan_ngpus();
  step.memory.zeroNgroups = std::max(1, plan.zero_ngroups());
  if (plan.zero() > 0 && plan.zero_ngroups() > 1)
    step.zeroBlockRanks = plan.runtime_ngpus() / plan.zero_ngroups();
  return step;
}

// `inputs`, when given (a plan of one stage), gets every device's step
// input.
Expected<Prices> priceWhole(const ir::Graph &graph, const proto::Plan &plan,
                            const cost::Cluster &cluster, const Options &options,
                            RelayoutCache &cache, std::vector<cost::StepInput> *inputs = nullptr) {
  transform::PartitionOptions partition;
  partition.search.cost = transform::tableRvdCost(cluster);
  partition.search.cache = cache.plans(); // every layer's adapters searched once
  auto pg = transform::partitionGraph(graph, plan, partition);
  if (!pg)
    return pg.status();
  cost::StepOptions step = stepOptionsOf(plan, options);
  Prices p;
  if (inputs) {
    step.microBatches = std::max(1, plan.micro_batches());
    *inputs = transform::stepInputs(graph, plan, *pg, step.memory);
    for (const cost::StepInput &in : *inputs) {
      auto s = cost::stepTime(in, cluster, step);
      if (!s)
        return s.status();
      p.steps.push_back(*s);
    }
  } else {
    auto steps = transform::estimateStep(graph, plan, *pg, cluster, step);
    if (!steps)
      return steps.status();
    p.steps = steps.take();
  }
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
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first != ranges[i - 1].second)
      return {}; // ops between the layers
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
  add(t.paramGather, a.paramGather, b.paramGather);
  t.buckets += static_cast<int>(times * (b.buckets - a.buckets));
}

// The reducers of the whole plan, from the base probe's step inputs. Their
// overlap with the backward is no sum over layers (the buckets fill across
// them, and a table's time is piecewise in the bytes), so the whole graph's
// gradients are laid out: each instance left out has its stand-in's
// gradients (the last kept instance before it), ready where its own place
// in the backward puts them, and bucketed as the runtime does. Returns
// false where the device's parts do not run in the layers' order (the
// counted reducers then stand).
Expected<bool> wholeReducers(const ir::Graph &graph, const Probe &base,
                             const std::vector<std::pair<size_t, size_t>> &ranges,
                             const std::vector<bool> &keep, const cost::StepInput &in,
                             const cost::Cluster &cluster, const cost::StepOptions &step,
                             cost::StepBreakdown &out) {
  const int layers = static_cast<int>(ranges.size());
  std::vector<int> standIn(ranges.size());
  for (int i = 0, last = 0; i < layers; ++i) {
    if (keep[static_cast<size_t>(i)])
      last = i;
    standIn[static_cast<size_t>(i)] = last;
  }
  // Where each part lies: -1 before the layers, `layers` after, else its
  // (kept) instance; in program order these never go back.
  std::vector<int> at(in.parts.size());
  for (size_t p = 0; p < in.parts.size(); ++p) {
    size_t k = base.source[static_cast<size_t>(in.parts[p].node->id)];
    if (k < ranges.front().first)
      at[p] = -1;
    else if (k >= ranges.back().second)
      at[p] = layers;
    else
      at[p] = static_cast<int>(std::upper_bound(ranges.begin(), ranges.end(),
                                                std::make_pair(k, ~size_t{0})) -
                               ranges.begin()) - 1;
    if (p > 0 && at[p] < at[p - 1])
      return false;
  }
  double forward = 0;
  std::vector<double> bw = cost::backwardSeconds(in, cluster, step, &forward);
  // Per part: its backward and what runs after it in its own block.
  std::vector<double> within(in.parts.size());
  std::map<int, double> block; // block -> its backward
  for (size_t p = in.parts.size(); p-- > 0;)
    within[p] = (block[at[p]] += bw[p]);
  // Per instance of the whole graph: the backward that runs before its
  // block's (what comes after it in program order).
  std::vector<double> before(ranges.size());
  double acc = block[layers];
  for (int i = layers; i-- > 0;) {
    before[static_cast<size_t>(i)] = acc;
    acc += block[standIn[static_cast<size_t>(i)]];
  }
  const double prefixStart = acc, backward = acc + block[-1];
  std::vector<cost::ReadyShard> shards;
  for (const cost::GradShard &g : in.grads) {
    const size_t p = static_cast<size_t>(g.firstReader);
    const int64_t tensor = base.tensorSource[static_cast<size_t>(g.tensor)];
    if (p >= in.parts.size()) {
      shards.push_back({tensor, g.bytes, g.ranks, 0.0});
      continue;
    }
    if (at[p] < 0 || at[p] >= layers) {
      shards.push_back({tensor, g.bytes, g.ranks, within[p] + (at[p] < 0 ? prefixStart : 0.0)});
      continue;
    }
    // The gradient's input slot at its first reader, and the reader's place
    // in its instance: the same slot of the same op in every instance.
    const ir::Node &reader = *in.parts[p].node;
    size_t slot = 0;
    while (slot < reader.inputs.size() && reader.inputs[slot] != g.tensor)
      ++slot;
    if (slot == reader.inputs.size())
      return false;
    const size_t s = static_cast<size_t>(at[p]);
    const size_t offset = base.source[static_cast<size_t>(reader.id)] - ranges[s].first;
    for (int i = static_cast<int>(s); i < layers && standIn[static_cast<size_t>(i)] == at[p]; ++i) {
      const ir::Node &mine = graph.nodes()[ranges[static_cast<size_t>(i)].first + offset];
      shards.push_back({mine.inputs[slot], g.bytes, g.ranks,
                        before[static_cast<size_t>(i)] + within[p]});
    }
  }
  auto reduce = cost::reduceTime(shards, cluster, step.bucketBytes, step.zeroBlockRanks);
  if (!reduce)
    return reduce.status();
  out.gradReduce = reduce->seconds;
  out.buckets = reduce->buckets;
  out.gradReduceExposed = std::max(0.0, reduce->end - backward);
  return true;
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
  const auto &ranges = cache.layerRanges(graph);
  std::vector<Run> runs;
  if (!options.wholeGraph && !ranges.empty())
    runs = runsOf(plan, ranges);
  if (runs.empty()) {
    NNSC_RETURN_IF_ERROR(plan::validatePlan(plan, graph));
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
  proto::Plan shell = plan;
  shell.clear_nodes();
  Probe base = probeOf(graph, &plan, ranges, keep, &shell);
  // Every instance left out is cut as one kept: checking the kept is enough.
  NNSC_RETURN_IF_ERROR(plan::validatePlan(base.plan, base.graph));
  std::vector<cost::StepInput> inputs;
  auto basePrices = priceWhole(base.graph, base.plan, cluster, options, cache, &inputs);
  if (!basePrices)
    return basePrices.status();
  Prices total = *basePrices;
  for (const Run &r : runs) {
    if (r.length <= kKept + 1)
      continue;
    std::vector<bool> more = keep;
    more[r.first + kKept] = true;
    Probe probe = probeOf(graph, &plan, ranges, more, &shell);
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
  const cost::StepOptions step = stepOptionsOf(base.plan, options);
  for (size_t d = 0; d < total.steps.size() && d < inputs.size(); ++d) {
    auto exact = wholeReducers(graph, base, ranges, keep, inputs[d], cluster, step, total.steps[d]);
    if (!exact)
      return exact.status();
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
