#pragma once
// Probe graphs (private to nnsc_autodist): the model with only a few of its
// repeated layers, standing for all of them. Pricing.cpp prices found plans
// on them; AutoDist.cpp builds and solves a configuration's problem on one.
#include <memory>
#include <utility>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/Plan.h"

namespace nnsc::autodist {

/// The graph with the instances `keep` says of the repeated block (node
/// ranges `ranges`, alike and contiguous: Repeats.h instanceRanges): a node
/// that read a tensor written in a left-out instance reads the same tensor
/// of the last kept instance before it (the first instance is always kept).
/// With `plan`, the plan of the kept nodes too, its recompute groups
/// renumbered in order. `shell`, when given, is `plan` without its nodes
/// (made once for several probes of one plan).
struct Probe {
  ir::Graph graph;
  proto::Plan plan;
  /// Per node of the probe: the node of the graph it was.
  std::vector<size_t> source;
  /// Per tensor of the probe: the tensor of the graph it was.
  std::vector<int64_t> tensorSource;
};
Probe probeOf(const ir::Graph &graph, const proto::Plan *plan,
              const std::vector<std::pair<size_t, size_t>> &ranges, const std::vector<bool> &keep,
              const proto::Plan *shell = nullptr);

} // namespace nnsc::autodist
