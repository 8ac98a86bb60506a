// Pricing one configuration of the search (Problem.h).
#include "Problem.h"

#include "Internal.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "nnsc/Cost/OpCost.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Transform/RvdSearch.h"
#include "nnsc/Transform/StepCost.h"

namespace nnsc::autodist {

namespace {

using transform::RvdLayout;

bool isState(const ir::Tensor &t) {
  return t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer ||
         t.kind == ir::TensorKind::Constant;
}

// A tensor's place under one option: whole on every device (R), partial
// sums (V), or cut along `dim` (D) into contiguous chunks or interleaved
// over `blocks`.
struct Place {
  char kind = 'R';
  int dim = -1;
  int64_t blocks = 1;
};

Place inputPlace(const OpOption &o, size_t i) {
  if (o.ident.empty())
    return {};
  if (o.effect.valueInput(i))
    return {'V'};
  int dim = o.effect.inputDims[i];
  if (dim >= 0)
    return {'D', dim, o.effect.inputBlocks.empty() ? 1 : o.effect.inputBlocks[i]};
  return {};
}

Place outputPlace(const OpOption &o, size_t k) {
  if (o.ident.empty())
    return {};
  if (o.effect.valueSplit)
    return {'V'};
  int dim = o.effect.outputDims[k];
  if (dim >= 0)
    return {'D', dim, o.effect.outputBlocks.empty() ? 1 : o.effect.outputBlocks[k]};
  return {};
}

// Where a gradient lands: a split op reading an input whole leaves partial
// gradients on its parts; a value chunk's gradient is the whole gradient.
Place gradientAtReader(const OpOption &o, size_t i) {
  Place p = inputPlace(o, i);
  if (p.kind == 'V')
    return {};
  if (p.kind == 'R' && !o.ident.empty())
    return {'V'};
  return p;
}

// What the producer needs back: the whole gradient of its piece (a partial
// sum's gradient is the whole gradient).
Place gradientAtProducer(Place p) { return p.kind == 'V' ? Place{} : p; }

std::optional<RvdLayout> layoutOf(const ir::Shape &shape, Place p, int n) {
  std::vector<int64_t> d(shape.size(), 1);
  int64_t r = 1, v = 1;
  if (p.kind == 'R')
    r = n;
  else if (p.kind == 'V')
    v = n;
  else
    d[static_cast<size_t>(p.dim)] = n;
  std::vector<int> devices(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    devices[static_cast<size_t>(i)] = i;
  auto layout = RvdLayout::make(shape, r, v, d, devices);
  if (!layout)
    return std::nullopt;
  if (p.kind == 'D' && p.blocks > 1) {
    std::vector<int64_t> blocks(shape.size(), 1);
    blocks[static_cast<size_t>(p.dim)] = p.blocks;
    auto blocked = layout->withBlocks(blocks);
    if (!blocked)
      return std::nullopt;
    return blocked.take();
  }
  return layout.take();
}

cost::TensorInfo localInfo(const ir::Tensor &t, int dim, int n, bool needsGrad) {
  cost::TensorInfo info{t.shape, t.dtype, needsGrad, isState(t)};
  if (dim >= 0 && static_cast<size_t>(dim) < info.shape.size())
    info.shape[static_cast<size_t>(dim)] /= n;
  return info;
}

ir::DType computeDType(const cost::OpShapes &s) {
  for (const cost::TensorInfo &t : s.outputs)
    if (ir::isFloatingPoint(t.dtype))
      return t.dtype;
  return ir::DType::Float32;
}

// The options of one node: whole, and a cut along each identifier its
// annotation allows over n devices (a pinned cut interleaved as pinned).
std::vector<OpOption> enumerateOptions(const ir::Graph &graph, const ir::Node &node, int n,
                                       bool replicateOnly, const plan::NodeConstraint *nc) {
  std::vector<OpOption> out(1); // replicate
  out[0].effect.inputDims.assign(node.inputs.size(), -1);
  out[0].effect.outputDims.assign(node.outputs.size(), -1);
  if (n <= 1 || replicateOnly)
    return out;
  auto bound = plan::bindNode(graph, node);
  if (!bound)
    return out;
  for (const std::string &id : ops::splittableIdents(*bound)) {
    // Every cut is priced (constrainOptions drops the forbidden ones after,
    // knowing what they would have saved); a pinned cut as pinned.
    int blocks = nc && nc->interleave > 1 && nc->allows(id) ? nc->interleave : 1;
    auto effect = ops::splitEffect(*bound, id, n, blocks);
    if (!effect || !plan::checkSplitOutputs(graph, node, *effect, id).isOk())
      continue;
    out.push_back({id, effect.take(), blocks});
  }
  return out;
}

// Drops the options node k's constraints forbid (priced already, so the
// memory they add is known); a node left nothing makes the configuration
// infeasible, named by its rule.
void constrainOptions(const ir::Graph &graph, size_t k, const plan::NodeConstraint &nc,
                      const Options &options, int n, Built &b) {
  auto &opts = b.options[k];
  auto &priced = b.problem.nodes[k];
  double least = priced.front().memory, leastKept = -1;
  std::vector<OpOption> keptOpts;
  std::vector<search::Option> keptPriced;
  for (size_t c = 0; c < opts.size(); ++c) {
    least = std::min(least, priced[c].memory);
    if (!nc.allows(opts[c].ident))
      continue;
    leastKept = leastKept < 0 ? priced[c].memory : std::min(leastKept, priced[c].memory);
    keptOpts.push_back(std::move(opts[c]));
    keptPriced.push_back(std::move(priced[c]));
  }
  if (keptOpts.empty()) {
    if (b.infeasible.empty()) {
      const auto &rule = options.constraints->rules[static_cast<size_t>(nc.rules.back())];
      b.infeasible = fmt::format(
          "constraint {} leaves {} no option over {} device(s): {}", rule.where(),
          plan::describeNode(graph.nodes()[k]), n,
          nc.replicate ? "no allowed identifier divides" : "whole is not allowed and no allowed "
                                                           "identifier divides");
    }
    opts.resize(1); // keep the problem well formed; the trial is rejected
    priced.resize(1);
    return;
  }
  b.constraintRaise[k] = leastKept - least;
  opts = std::move(keptOpts);
  priced = std::move(keptPriced);
}

// Bytes per element of what a weight's holder keeps: the weight, its
// gradient and its optimizer state (sharded over the copies by ZeRO), and
// the bytes per element its gradient reduction sends (float32 in mixed
// precision too: nnsc-run's precision.grad_reduce_dtype default). Under
// ZeRO-3 a weight that one recompute group alone reads keeps
// `groupWeight` (its value sharded too) instead of `weight`.
struct StateBytes {
  double weight = 4, grad = 4, optimizer = 8, wire = 4, groupWeight = 4;
};

StateBytes stateBytes(const Options &options, const Setting &s) {
  StateBytes b;
  bool mixed = cost::isMixed(options.memory.precision);
  b.weight = mixed ? 2 : 4;
  b.grad = cost::gradBytesPerElement(options.memory, ir::DType::Float32);
  cost::MemoryOptions m = options.memory;
  m.zero = 0;
  // ZeRO shards over the copies of a block (zero_ngroups).
  const double shardOver = double(s.dp) / zeroBlocks(options, s.zero);
  b.optimizer = cost::optimizerBytesPerElement(m) / (s.zero >= 1 ? shardOver : 1);
  b.grad /= s.zero >= 2 ? shardOver : 1;
  b.groupWeight = b.weight / (s.zero >= 3 ? shardOver : 1);
  return b;
}

std::vector<int> ranksOf(int first, int stride, int count) {
  std::vector<int> r;
  for (int i = 0; i < count; ++i)
    r.push_back(first + i * stride);
  return r;
}

} // namespace

RelayoutCache::RelayoutCache(const cost::Cluster &cluster)
    : cost_(transform::tableRvdCost(cluster)) {}

const std::vector<OpOption> &RelayoutCache::options(const ir::Graph &graph, const ir::Node &node,
                                                    int n, bool replicateOnly) {
  auto key = std::make_tuple(&graph, node.id, n, replicateOnly);
  auto it = options_.find(key);
  if (it == options_.end())
    it = options_.emplace(key, enumerateOptions(graph, node, n, replicateOnly, nullptr)).first;
  return it->second;
}

const GraphFacts &RelayoutCache::facts(const ir::Graph &graph) {
  auto [it, added] = facts_.try_emplace(&graph);
  GraphFacts &facts = it->second;
  if (!added)
    return facts;
  facts.flow = cost::gradientFlow(graph);
  facts.names.clear();
  facts.saved.assign(graph.tensors().size(), false);
  for (const ir::Node &node : graph.nodes()) {
    facts.names.push_back(plan::describeNode(node));
    cost::OpShapes shapes;
    shapes.node = &node;
    for (int64_t t : node.inputs)
      shapes.inputs.push_back(
          localInfo(graph.tensor(t), -1, 1, facts.flow[static_cast<size_t>(t)]));
    for (int64_t t : node.outputs)
      shapes.outputs.push_back(
          localInfo(graph.tensor(t), -1, 1, facts.flow[static_cast<size_t>(t)]));
    cost::OpCost c = cost::opCost(shapes);
    for (int i : c.saved.inputs)
      facts.saved[static_cast<size_t>(node.inputs[static_cast<size_t>(i)])] = true;
    for (int q : c.saved.outputs)
      facts.saved[static_cast<size_t>(node.outputs[static_cast<size_t>(q)])] = true;
  }
  return facts;
}

const std::vector<double> &
RelayoutCache::edgePrices(const std::vector<int64_t> &key,
                          const std::function<std::vector<double>()> &find) {
  auto it = edges_.find(key);
  if (it == edges_.end())
    it = edges_.emplace(key, find()).first;
  return it->second;
}

double RelayoutCache::price(const RvdLayout &from, const RvdLayout &to, int64_t elementBytes) {
  // Each list behind its length, so no two pairs share a key.
  std::vector<int64_t> key{elementBytes};
  for (const std::vector<int64_t> *part :
       {&from.counts(), &to.counts(), &from.shape(), &from.blocks(), &to.blocks()}) {
    key.push_back(static_cast<int64_t>(part->size()));
    key.insert(key.end(), part->begin(), part->end());
  }
  auto it = prices_.find(key);
  if (it != prices_.end())
    return it->second;
  ++searches_;
  transform::RvdSearchOptions opts;
  opts.elementBytes = elementBytes;
  opts.cost = cost_;
  auto plan = transform::searchRvdPlan(from, to, opts);
  double price = plan ? plan->cost : kUnreachable;
  prices_.emplace(std::move(key), price);
  return price;
}

namespace {

// Where input `index` of a node comes from: the node that writes it
// (output `index`) or, for state, its first reader (its input `index`).
struct Source {
  size_t from = 0;
  bool state = false;
  size_t index = 0;
};

// Every op a decision of its own; sources[k][i] set where input i of node
// k is written by another node (or stored by another reader).
struct Raw {
  Built b;
  std::vector<std::vector<std::optional<Source>>> sources;
};

Raw buildRaw(const ir::Graph &graph, const cost::Cluster &cluster, const Options &options,
             const Setting &s, RelayoutCache &cache) {
  const int n = s.planNgpus;
  const double micro = s.microBatches > 0 ? s.microBatches : options.microBatches;
  const auto &nodes = graph.nodes();
  auto planned = [&](size_t k) { return s.inStage.empty() || s.inStage[k]; };
  const GraphFacts &facts = cache.facts(graph);
  const std::vector<bool> &flow = facts.flow;
  const std::vector<bool> &saved = facts.saved;
  StateBytes sb = stateBytes(options, s);

  // Producers of activations; first readers of state.
  std::map<int64_t, std::pair<size_t, size_t>> producer; // tensor -> (node index, output)
  std::map<int64_t, std::pair<size_t, size_t>> holder;   // state -> (first node, input)
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!planned(k))
      continue; // another stage's: what it writes arrives, its state is held apart
    for (size_t o = 0; o < nodes[k].outputs.size(); ++o)
      producer[nodes[k].outputs[o]] = {k, o};
    for (size_t i = 0; i < nodes[k].inputs.size(); ++i)
      if (isState(graph.tensor(nodes[k].inputs[i])))
        holder.emplace(nodes[k].inputs[i], std::make_pair(k, i));
  }
  // ZeRO-3: the recompute group that alone reads each weight (-1: another
  // group, or an op outside any, reads it too), as the runtime shards it.
  std::map<int64_t, int> soleGroup;
  if (s.zero >= 3)
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (!planned(k))
        continue;
      const int g = s.recomputeGroup.empty() ? -1 : std::max(-1, s.recomputeGroup[k]);
      for (int64_t t : nodes[k].inputs)
        if (graph.tensor(t).kind == ir::TensorKind::Param)
          if (auto [it, fresh] = soleGroup.emplace(t, g); !fresh && it->second != g)
            it->second = -1;
    }

  // What a recompute group keeps: its inputs from outside the group, each
  // tensor once however many of its ops (or later groups: a mask, the
  // rotary tables) read it, at the size the op that first reads it there
  // reads it (the runtime keeps the group's input as the group reads it,
  // after any re-layout), so that op's options carry it. A tensor its
  // writer already saves for backward outside any group is counted there.
  std::map<size_t, std::vector<size_t>> keepsAt; // node -> inputs it keeps for its group
  std::set<int64_t> kept;
  for (size_t k = 0; k < nodes.size(); ++k) {
    int g = s.recomputeGroup.empty() ? -1 : s.recomputeGroup[k];
    if (g < 0 || !planned(k))
      continue;
    for (size_t i = 0; i < nodes[k].inputs.size(); ++i) {
      int64_t t = nodes[k].inputs[i];
      auto p = producer.find(t);
      bool inside = p != producer.end() && s.recomputeGroup[p->second.first] == g;
      bool savedByWriter = p != producer.end() && s.recomputeGroup[p->second.first] < 0 &&
                           saved[static_cast<size_t>(t)];
      if (inside || savedByWriter || isState(graph.tensor(t)) || !kept.insert(t).second)
        continue;
      keepsAt[k].push_back(i);
    }
  }

  // Seconds per gradient byte reduced: the reducers all-reduce gradients
  // in buckets (25 MiB), so a weight pays the bucket's bandwidth, not a
  // collective's latency of its own.
  const double bucket = 25.0 * (1 << 20);
  auto perByte = [&](const std::vector<int> &ranks) {
    if (ranks.size() < 2)
      return 0.0;
    auto sec = cluster.commTime(cost::Collective::AllReduce, static_cast<int64_t>(bucket), ranks);
    return sec ? *sec / bucket : 0.0;
  };
  const double reduceInCopy = perByte(ranksOf(0, 1, n));
  // ZeRO in blocks: over the copies of a block, then a block's share of the
  // bucket over the blocks (1/g of it, g the weight's holders in the block).
  const int blocks = zeroBlocks(options, s.zero), inBlock = s.dp / blocks;
  auto overCopies = [&](int holdersInCopy) {
    if (blocks == 1)
      return perByte(ranksOf(0, n * s.stages, s.dp));
    return perByte(ranksOf(0, n * s.stages, inBlock)) +
           perByte(ranksOf(0, n * s.stages * inBlock, blocks)) / (inBlock * holdersInCopy);
  };
  const double reduceOverCopies = overCopies(1), reduceReplicatedOverCopies = overCopies(n);
  // ZeRO-3 gathers a group's weights over the copies of a block, twice a
  // micro-batch (before its forward and before its re-run in backward), in
  // the weights' dtype; seconds per byte of the whole weights, the
  // gathers as large as a bucket.
  double gatherPerByte = 0;
  if (s.zero >= 3 && inBlock > 1)
    if (auto sec = cluster.commTime(cost::Collective::AllGather, static_cast<int64_t>(bucket),
                                    ranksOf(0, n * s.stages, inBlock)))
      gatherPerByte = *sec / bucket;

  Raw raw;
  Built &b = raw.b;
  raw.sources.resize(nodes.size());
  b.options.resize(nodes.size());
  b.problem.nodes.resize(nodes.size());
  b.problem.nodeNames.resize(nodes.size());
  b.constraintRaise.assign(nodes.size(), 0.0);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const ir::Node &node = nodes[k];
    raw.sources[k].resize(node.inputs.size());
    b.problem.nodeNames[k] = facts.names[k];
    if (!planned(k)) {
      b.options[k] = enumerateOptions(graph, node, n, true, nullptr);
      b.problem.nodes[k].assign(b.options[k].size(), search::Option{0, 0, "replicate"});
      continue;
    }
    bool only = !s.replicateOnly.empty() && s.replicateOnly[k];
    // An op that no gradient passes and that reads no weight (masks,
    // positions, rotary tables) is cheap and its whole result cuts locally
    // for any reader: it stays whole.
    bool carriesGrad = false, readsWeight = false;
    for (int64_t t : node.outputs)
      carriesGrad = carriesGrad || flow[static_cast<size_t>(t)];
    for (int64_t t : node.inputs)
      readsWeight = readsWeight || graph.tensor(t).kind == ir::TensorKind::Param;
    const plan::NodeConstraint *nc =
        s.constraints && (*s.constraints)[k].constrained() ? &(*s.constraints)[k] : nullptr;
    // A constrained op is searched whatever the heuristics say.
    bool replicate = only || (!nc && !carriesGrad && !readsWeight);
    b.options[k] = nc && nc->interleave > 1 ? enumerateOptions(graph, node, n, replicate, nc)
                                            : cache.options(graph, node, n, replicate);
    int group = s.recomputeGroup.empty() ? -1 : s.recomputeGroup[k];
    for (const OpOption &o : b.options[k]) {
      int parts = o.ident.empty() ? 1 : n;
      cost::OpShapes shapes;
      shapes.node = &node;
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ir::Tensor &t = graph.tensor(node.inputs[i]);
        shapes.inputs.push_back(localInfo(t, parts > 1 ? o.effect.inputDims[i] : -1, parts,
                                          flow[static_cast<size_t>(t.id)]));
      }
      for (size_t q = 0; q < node.outputs.size(); ++q) {
        const ir::Tensor &t = graph.tensor(node.outputs[q]);
        int dim = parts > 1 && !o.effect.valueSplit ? o.effect.outputDims[q] : -1;
        shapes.outputs.push_back(localInfo(t, dim, parts, flow[static_cast<size_t>(t.id)]));
      }
      cost::OpCost c = cost::opCost(shapes);
      ir::DType dt = computeDType(shapes);
      double fwd = cost::workSeconds(c.forward, dt, cluster.device);
      double bwd = cost::workSeconds(c.backward, dt, cluster.device);
      search::Option opt;
      opt.name = o.ident.empty() ? "replicate" : "split " + o.ident;
      opt.time = micro * (fwd + bwd + (group >= 0 ? fwd : 0));

      // Activations this option keeps for backward (one micro-batch): the
      // tensors it writes that any op saves (each counted once, by its
      // writer, at the size this option writes), graph inputs it saves, and
      // what it makes inside (masks, statistics).
      if (group < 0) {
        for (int i : c.saved.inputs) {
          int64_t t = node.inputs[static_cast<size_t>(i)];
          if (!shapes.inputs[static_cast<size_t>(i)].isState && !producer.count(t))
            opt.memory += shapes.inputs[static_cast<size_t>(i)].bytes();
        }
        for (size_t q = 0; q < node.outputs.size(); ++q)
          if (saved[static_cast<size_t>(node.outputs[q])])
            opt.memory += shapes.outputs[q].bytes();
        opt.memory += c.saved.extraBytes;
      } else if (auto keeps = keepsAt.find(k); keeps != keepsAt.end()) {
        for (size_t i : keeps->second)
          opt.memory += shapes.inputs[i].bytes();
      }
      opt.memory *= s.inFlight; // activations only: the weights follow
      // Weights this option holds first: their bytes, and their gradients'
      // reductions (inside the copy when the weight is whole on every part,
      // and over the data-parallel copies).
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ir::Tensor &t = graph.tensor(node.inputs[i]);
        if (t.kind != ir::TensorKind::Param && t.kind != ir::TensorKind::Buffer)
          continue;
        if (holder.at(t.id).first != k)
          continue;
        Place p = inputPlace(o, i);
        double elements = static_cast<double>(ir::numel(t.shape)) / (p.kind == 'D' ? n : 1);
        bool trainable = t.kind == ir::TensorKind::Param && t.requiresGrad;
        auto sole = soleGroup.find(t.id);
        bool gathered = trainable && sole != soleGroup.end() && sole->second >= 0;
        opt.memory +=
            elements * (trainable ? (gathered ? sb.groupWeight : sb.weight) + sb.grad + sb.optimizer
                                  : static_cast<double>(ir::dtypeSize(t.dtype)));
        if (!trainable)
          continue;
        if (gathered)
          opt.time += 2 * micro * elements * sb.weight * gatherPerByte;
        double gradBytes = elements * sb.wire;
        if (n > 1 && p.kind != 'D')
          opt.time += gradBytes * reduceInCopy;
        // ZeRO-2 reduces every micro-batch's gradients, the others once a step.
        opt.time += gradBytes *
                    (n > 1 && p.kind != 'D' ? reduceReplicatedOverCopies : reduceOverCopies) *
                    (s.zero >= 2 ? micro : 1);
      }
      if (!s.weight.empty()) {
        opt.time *= s.weight[k];
        opt.memory *= s.weight[k];
      }
      b.problem.nodes[k].push_back(std::move(opt));
    }
    if (nc)
      constrainOptions(graph, k, *nc, options, n, b);
    if (b.options[k].size() > 1)
      ++b.decisions;
  }
  if (n <= 1)
    return raw;

  // Re-layouts between the options of producers (or first readers of
  // state) and readers, forward and, where a gradient flows, backward.
  std::map<std::pair<size_t, size_t>, size_t> edgeIndex;
  auto edgeFor = [&](size_t from, size_t to) -> search::Edge & {
    auto [it, added] = edgeIndex.emplace(std::make_pair(from, to), b.problem.edges.size());
    if (added) {
      search::Edge e;
      e.from = static_cast<int>(from);
      e.to = static_cast<int>(to);
      e.cost.assign(b.options[from].size() * b.options[to].size(), 0.0);
      b.problem.edges.push_back(std::move(e));
    }
    return b.problem.edges[it->second];
  };
  for (size_t k = 0; k < nodes.size(); ++k) {
    const ir::Node &node = nodes[k];
    if (!planned(k))
      continue;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      int64_t t = node.inputs[i];
      const ir::Tensor &tensor = graph.tensor(t);
      size_t from;
      std::function<Place(const OpOption &)> sourcePlace;
      if (isState(tensor)) {
        auto h = holder.at(t);
        if (h.first == k)
          continue; // stored as this reader wants it
        if (tensor.kind != ir::TensorKind::Param)
          continue; // constants and buffers: small, each reader cuts its piece (priced exactly later)
        from = h.first;
        size_t hi = h.second;
        sourcePlace = [hi](const OpOption &o) { return inputPlace(o, hi); };
        raw.sources[k][i] = Source{from, true, hi};
      } else {
        auto p = producer.find(t);
        if (p == producer.end())
          continue; // a graph input: fed whole, cut locally
        from = p->second.first;
        size_t out = p->second.second;
        sourcePlace = [out](const OpOption &o) { return outputPlace(o, out); };
        raw.sources[k][i] = Source{from, false, out};
      }
      if (from == k)
        continue;
      int64_t elementBytes = std::max<int64_t>(1, ir::dtypeSize(tensor.dtype));
      bool backward = flow[static_cast<size_t>(t)] && ir::isFloatingPoint(tensor.dtype);
      search::Edge &e = edgeFor(from, k);
      const auto &fromOptions = b.options[from];
      const auto &toOptions = b.options[k];
      // The layouts every pair of options meets in, as a key: every layer
      // has the same edges, every configuration of these devices the same
      // layouts, so each edge's prices are found once.
      std::vector<int64_t> key{n, elementBytes, backward ? 1 : 0,
                               static_cast<int64_t>(tensor.shape.size())};
      key.insert(key.end(), tensor.shape.begin(), tensor.shape.end());
      auto addPlace = [&key](Place p) {
        key.push_back(p.kind);
        key.push_back(p.dim);
        key.push_back(p.blocks);
      };
      std::vector<Place> sources, targets, gradSources;
      for (const OpOption &o : fromOptions)
        sources.push_back(sourcePlace(o));
      for (const OpOption &o : toOptions) {
        targets.push_back(inputPlace(o, i));
        gradSources.push_back(gradientAtReader(o, i));
      }
      key.push_back(static_cast<int64_t>(sources.size()));
      for (Place p : sources)
        addPlace(p);
      for (size_t c = 0; c < targets.size(); ++c) {
        addPlace(targets[c]);
        addPlace(gradSources[c]);
      }
      const std::vector<double> &prices = cache.edgePrices(key, [&] {
        std::vector<double> out(sources.size() * targets.size(), 0.0);
        for (size_t a = 0; a < sources.size(); ++a) {
          auto srcLayout = layoutOf(tensor.shape, sources[a], n);
          auto gradTarget = layoutOf(tensor.shape, gradientAtProducer(sources[a]), n);
          for (size_t c = 0; c < targets.size(); ++c) {
            double price = 0;
            auto dstLayout = layoutOf(tensor.shape, targets[c], n);
            if (!srcLayout || !dstLayout)
              price = RelayoutCache::kUnreachable;
            else
              price = cache.price(*srcLayout, *dstLayout, elementBytes);
            if (backward && price < RelayoutCache::kUnreachable) {
              auto gradSource = layoutOf(tensor.shape, gradSources[c], n);
              price += gradSource && gradTarget
                           ? cache.price(*gradSource, *gradTarget, elementBytes)
                           : RelayoutCache::kUnreachable;
            }
            out[a * targets.size() + c] = price;
          }
        }
        return out;
      });
      const double times = micro * (s.weight.empty() ? 1.0 : s.weight[k]);
      for (size_t q = 0; q < prices.size(); ++q)
        e.cost[q] += times * prices[q];
    }
  }
  return raw;
}

bool samePlace(Place a, Place b) {
  return a.kind == b.kind && (a.kind != 'D' || (a.dim == b.dim && a.blocks == b.blocks));
}

} // namespace

Built buildProblem(const ir::Graph &graph, const cost::Cluster &cluster, const Options &options,
                   const Setting &s, RelayoutCache &cache) {
  Raw raw = buildRaw(graph, cluster, options, s, cache);
  Built &r = raw.b;
  const size_t count = r.options.size();
  Built b;
  b.options = r.options;
  b.ops = static_cast<int>(count);
  b.infeasible = r.infeasible;
  b.constraintRaise = r.constraintRaise;
  b.decisionOf.assign(count, -1);
  b.optionOf.resize(count);
  std::vector<std::vector<size_t>> members; // per decision
  std::vector<size_t> width;                // options per decision
  for (size_t k = 0; k < count; ++k) {
    // The decisions k reads from.
    std::set<int> from;
    for (const auto &src : raw.sources[k])
      if (src)
        from.insert(b.decisionOf[src->from]);
    // An op with a weight of its own has a choice of its own (column or
    // row cut, or whole): never a follower.
    bool readsWeight = false;
    for (int64_t t : graph.nodes()[k].inputs)
      readsWeight = readsWeight || graph.tensor(t).kind == ir::TensorKind::Param;
    if (from.size() == 1 && !readsWeight) {
      int d = *from.begin();
      // k's options, cheapest first: the one it takes where several read
      // the same layouts.
      std::vector<size_t> order(r.options[k].size());
      for (size_t c = 0; c < order.size(); ++c)
        order[c] = c;
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return r.problem.nodes[k][x].time < r.problem.nodes[k][y].time;
      });
      std::vector<int> map(width[static_cast<size_t>(d)], -1);
      bool follows = true;
      for (size_t g = 0; g < map.size() && follows; ++g) {
        for (size_t c : order) {
          bool match = true;
          for (size_t i = 0; i < raw.sources[k].size() && match; ++i) {
            const auto &src = raw.sources[k][i];
            if (!src)
              continue;
            const OpOption &so = r.options[src->from][static_cast<size_t>(
                b.optionOf[src->from][g])];
            Place written = src->state ? inputPlace(so, src->index) : outputPlace(so, src->index);
            match = samePlace(written, inputPlace(r.options[k][c], i));
          }
          if (match) {
            map[g] = static_cast<int>(c);
            break;
          }
        }
        follows = map[g] >= 0;
      }
      if (follows) {
        b.decisionOf[k] = d;
        b.optionOf[k] = std::move(map);
        members[static_cast<size_t>(d)].push_back(k);
        continue;
      }
    }
    b.decisionOf[k] = static_cast<int>(members.size());
    members.push_back({k});
    width.push_back(r.options[k].size());
    for (size_t c = 0; c < r.options[k].size(); ++c)
      b.optionOf[k].push_back(static_cast<int>(c));
  }

  // Prices per decision: its ops' options, the re-layouts inside it, and
  // the re-layouts between decisions.
  const size_t decisions = members.size();
  b.problem.memoryLimit = r.problem.memoryLimit;
  b.problem.nodes.resize(decisions);
  b.problem.nodeNames.resize(decisions);
  for (size_t d = 0; d < decisions; ++d) {
    size_t first = members[d].front();
    b.problem.nodeNames[d] = r.problem.nodeNames[first];
    for (size_t g = 0; g < width[d]; ++g) {
      search::Option o;
      o.name = r.problem.nodes[first][g].name;
      for (size_t k : members[d]) {
        const search::Option &ko =
            r.problem.nodes[k][static_cast<size_t>(b.optionOf[k][g])];
        o.time += ko.time;
        o.memory += ko.memory;
      }
      b.problem.nodes[d].push_back(std::move(o));
    }
    if (width[d] > 1)
      ++b.decisions;
  }
  std::map<std::pair<int, int>, size_t> edgeIndex;
  for (const search::Edge &e : r.problem.edges) {
    auto u = static_cast<size_t>(e.from), v = static_cast<size_t>(e.to);
    int du = b.decisionOf[u], dv = b.decisionOf[v];
    size_t toWidth = r.options[v].size();
    if (du == dv) {
      for (size_t g = 0; g < width[static_cast<size_t>(du)]; ++g)
        b.problem.nodes[static_cast<size_t>(du)][g].time += e.cost[static_cast<size_t>(
            b.optionOf[u][g]) * toWidth + static_cast<size_t>(b.optionOf[v][g])];
      continue;
    }
    auto [it, added] = edgeIndex.emplace(std::make_pair(du, dv), b.problem.edges.size());
    size_t wu = width[static_cast<size_t>(du)], wv = width[static_cast<size_t>(dv)];
    if (added) {
      search::Edge de;
      de.from = du;
      de.to = dv;
      de.cost.assign(wu * wv, 0.0);
      b.problem.edges.push_back(std::move(de));
    }
    search::Edge &de = b.problem.edges[it->second];
    for (size_t gu = 0; gu < wu; ++gu)
      for (size_t gv = 0; gv < wv; ++gv)
        de.cost[gu * wv + gv] += e.cost[static_cast<size_t>(b.optionOf[u][gu]) * toWidth +
                                        static_cast<size_t>(b.optionOf[v][gv])];
  }
  return b;
}

} // namespace nnsc::autodist
