// Dijkstra over RVD placements (see RvdSearch.h).
#include "nnsc/Transform/RvdSearch.h"

#include <cmath>
#include <map>
#include <queue>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::transform {

namespace {

using StateKey = std::vector<int64_t>;

StateKey keyOf(const RvdLayout &canonical) {
  StateKey key = canonical.counts();
  key.insert(key.end(), canonical.devices().begin(), canonical.devices().end());
  return key;
}

std::vector<int64_t> divisorsAbove1(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t c = 2; c <= n; ++c)
    if (n % c == 0)
      out.push_back(c);
  return out;
}

// Fills a step's bytes and cost, given the layout it starts from.
void price(RvdStep &step, const RvdLayout &before, int64_t elementBytes, const RvdCostFn &cost) {
  step.bytesPerDevice = stepBytes(before, step.after, elementBytes);
  step.cost = cost(step.kind, step.bytesPerDevice, step.groupSize());
}

// The layouts a move out of `axis` may start from: the layout itself, and
// for R and V its regroupings.
std::vector<RvdLayout> startVariants(const RvdLayout &layout, int axis) {
  std::vector<RvdLayout> out{layout};
  int64_t size = layout.axisSize(axis);
  if (axis == kAxisR || axis == kAxisV)
    for (int64_t k : divisorsAbove1(size))
      if (k < size)
        out.push_back(regroupAxis(layout, axis, k));
  return out;
}

struct Node {
  RvdLayout layout; // canonical
  double cost = 0;
  int hops = 0;
  int parent = -1;
  std::vector<RvdStep> via; // the steps from the parent
  bool done = false;
};

// True when (cost, hops) beats the node's: lower cost beyond a relative
// 1e-9, or as cheap with fewer steps.
bool beats(double cost, int hops, const Node &node) {
  double tol = 1e-9 * std::max(std::fabs(cost), std::fabs(node.cost));
  if (cost < node.cost - tol)
    return true;
  return cost <= node.cost + tol && hops < node.hops;
}

class Search {
public:
  Search(const RvdSearchOptions &options, RvdCostFn cost, std::vector<RvdStep> tail)
      : options_(options), cost_(std::move(cost)), tail_(std::move(tail)) {}

  Expected<std::vector<RvdStep>> run(const RvdLayout &from, const RvdLayout &to);

private:
  void offer(int parent, std::vector<RvdStep> via, const RvdLayout &layout);
  void expand(int id);
  void expandMove(int id, Transition move);
  std::vector<RvdStep> pathTo(int id) const;

  using Entry = std::tuple<double, int, int>; // cost, hops, node
  const RvdSearchOptions &options_;
  RvdCostFn cost_;
  std::vector<std::pair<int, int>> axisPairs_; // (from, to) that some primitive moves
  std::vector<RvdStep> tail_;
  std::vector<Node> nodes_;
  std::map<StateKey, int> index_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_;
};

void Search::offer(int parent, std::vector<RvdStep> via, const RvdLayout &layout) {
  double cost = parent < 0 ? 0 : nodes_[parent].cost;
  for (const RvdStep &step : via)
    cost += step.cost;
  int hops = (parent < 0 ? 0 : nodes_[parent].hops) + static_cast<int>(via.size());
  RvdLayout canonical = layout.canonical();
  auto [it, fresh] = index_.emplace(keyOf(canonical), static_cast<int>(nodes_.size()));
  if (fresh)
    nodes_.push_back(Node{std::move(canonical), cost, hops, parent, std::move(via), false});
  else if (!nodes_[it->second].done && beats(cost, hops, nodes_[it->second]))
    nodes_[it->second] = Node{std::move(canonical), cost, hops, parent, std::move(via), false};
  else
    return;
  queue_.emplace(cost, hops, it->second);
}

void Search::expandMove(int id, Transition move) {
  for (const RvdLayout &start : startVariants(nodes_[id].layout, move.fromAxis)) {
    auto step = applyTransition(start, move);
    if (!step)
      continue; // a D count that no longer divides its dim
    price(*step, start, options_.elementBytes, cost_);
    RvdLayout after = step->after;
    offer(id, {step.take()}, after);
  }
}

void Search::expand(int id) {
  RvdLayout layout = nodes_[id].layout; // nodes_ may grow below
  for (auto [from, to] : axisPairs_)
    for (int64_t c : divisorsAbove1(layout.axisSize(from)))
      expandMove(id, Transition{from, to, c});
  if (layout.r() == layout.numDevices() && !tail_.empty())
    offer(id, tail_, tail_.back().after);
}

std::vector<RvdStep> Search::pathTo(int id) const {
  std::vector<const Node *> chain;
  for (; id >= 0; id = nodes_[id].parent)
    chain.push_back(&nodes_[id]);
  std::vector<RvdStep> steps;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    steps.insert(steps.end(), (*it)->via.begin(), (*it)->via.end());
  return steps;
}

Expected<std::vector<RvdStep>> Search::run(const RvdLayout &from, const RvdLayout &to) {
  StateKey goal = keyOf(to.canonical());
  for (int a = 0; a < from.numAxes(); ++a)
    for (int b = 0; b < from.numAxes(); ++b)
      if (primitiveFor(a, b).isOk())
        axisPairs_.emplace_back(a, b);
  offer(-1, {}, from);
  while (!queue_.empty()) {
    auto [cost, hops, id] = queue_.top();
    queue_.pop();
    Node &node = nodes_[id];
    if (node.done || cost != node.cost || hops != node.hops)
      continue; // superseded entry
    node.done = true;
    if (keyOf(node.layout) == goal)
      return pathTo(id);
    if (static_cast<int64_t>(nodes_.size()) > options_.maxStates)
      return errorf("rvd search from {} to {} gave up after {} placements", from.str(), to.str(),
                    nodes_.size());
    expand(id);
  }
  return Status::internal(fmt::format("rvd search found no path from {} to {}",
                                      from.strWithDevices(), to.strWithDevices()));
}

Status checkEnds(const RvdLayout &producer, const RvdLayout &consumer,
                 const RvdSearchOptions &options) {
  if (producer.shape() != consumer.shape())
    return errorf("producer shape [{}] differs from consumer shape [{}]",
                  fmt::join(producer.shape(), ", "), fmt::join(consumer.shape(), ", "));
  if (producer.deviceSet() != consumer.deviceSet())
    return errorf("cross-device-set layouts not supported yet: producer {} on [{}], consumer {} "
                  "on [{}]",
                  producer.str(), fmt::join(producer.deviceSet(), ","), consumer.str(),
                  fmt::join(consumer.deviceSet(), ","));
  if (options.elementBytes < 1)
    return errorf("element size must be at least 1 byte, got {}", options.elementBytes);
  return Status::ok();
}

} // namespace

Expected<std::vector<RvdStep>> localStepsFromReplica(const RvdLayout &consumer,
                                                     int64_t elementBytes, const RvdCostFn &cost) {
  std::vector<Transition> moves;
  if (consumer.v() > 1)
    moves.push_back({kAxisR, kAxisV, consumer.v()});
  for (int dim = 0; dim < consumer.rank(); ++dim)
    if (consumer.axisSize(axisOfDim(dim)) > 1)
      moves.push_back({kAxisR, axisOfDim(dim), consumer.axisSize(axisOfDim(dim))});
  // Walk back from the consumer to find where each step starts.
  std::vector<RvdLayout> starts(moves.size());
  RvdLayout layout = consumer;
  for (size_t i = moves.size(); i-- > 0;) {
    auto before = undoTransition(layout, moves[i]);
    if (!before)
      return before.status();
    layout = starts[i] = before.take();
  }
  std::vector<RvdStep> steps;
  for (size_t i = 0; i < moves.size(); ++i) {
    auto step = applyTransition(starts[i], moves[i]);
    if (!step)
      return step.status();
    price(*step, starts[i], elementBytes, cost);
    steps.push_back(step.take());
  }
  return steps;
}

const RvdPlan *RvdPlanCache::find(const std::string &key) {
  auto it = plans_.find(key);
  ++(it == plans_.end() ? misses_ : hits_);
  return it == plans_.end() ? nullptr : &it->second;
}

namespace {

std::string cacheKey(const RvdLayout &producer, const RvdLayout &consumer, int64_t elementBytes) {
  std::string key = producer.strWithDevices() + "|" + consumer.strWithDevices() + "|" +
                    std::to_string(elementBytes);
  for (const RvdLayout *l : {&producer, &consumer}) {
    for (int64_t s : l->shape())
      key += "," + std::to_string(s);
    for (int64_t b : l->blocks())
      key += "b" + std::to_string(b);
  }
  return key;
}

} // namespace

Expected<RvdPlan> searchRvdPlan(const RvdLayout &producer, const RvdLayout &consumer,
                                const RvdSearchOptions &options) {
  if (options.cache) {
    std::string key = cacheKey(producer, consumer, options.elementBytes);
    if (const RvdPlan *kept = options.cache->find(key))
      return *kept;
    RvdSearchOptions uncached = options;
    uncached.cache = nullptr;
    auto plan = searchRvdPlan(producer, consumer, uncached);
    if (plan)
      options.cache->insert(std::move(key), *plan);
    return plan;
  }
  NNSC_RETURN_IF_ERROR(checkEnds(producer, consumer, options));
  RvdCostFn cost = options.cost ? options.cost : defaultRvdCost();
  RvdPlan plan{producer, consumer, {}, 0};
  if (producer.equivalent(consumer))
    return plan;
  auto tail = localStepsFromReplica(consumer, options.elementBytes, cost);
  if (!tail)
    return tail.status();
  auto steps = Search(options, cost, tail.take()).run(producer, consumer);
  if (!steps)
    return steps.status();
  plan.steps = steps.take();
  for (const RvdStep &step : plan.steps)
    plan.cost += step.cost;
  if (plan.steps.empty() || !plan.steps.back().after.equivalent(consumer))
    return Status::internal("rvd search ended away from the consumer layout " +
                            consumer.strWithDevices());
  return plan;
}

} // namespace nnsc::transform
