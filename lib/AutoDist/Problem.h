#pragma once
// One configuration of autodist's search as a search::Problem (private to
// nnsc_autodist): the options of every op, priced, and the re-layout costs
// between producers and consumers.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "Probes.h"
#include "nnsc/AutoDist/AutoDist.h"
#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Plan/Constraints.h"
#include "nnsc/Search/Problem.h"
#include "nnsc/Transform/RvdCost.h"
#include "nnsc/Transform/RvdSearch.h"

namespace nnsc::autodist {

/// What the search fixes before it prices the ops.
struct Setting {
  int planNgpus = 1;
  int dp = 1;
  int zero = 0;
  std::vector<int> recomputeGroup; ///< per node: its group, -1 none
  /// Nodes that must stay whole (their split failed the partition before).
  std::vector<bool> replicateOnly;
  /// Per node: what the constraints file leaves it (empty: no file).
  const std::vector<plan::NodeConstraint> *constraints = nullptr;
  /// Pipelines: the nodes of the one stage this problem plans (empty: every
  /// node). The others keep one whole option at no price; what they write
  /// arrives here as an input, and state is held by its first reader here.
  std::vector<bool> inStage;
  int stages = 1;        ///< physical stages: copies' ranks are stages x planNgpus apart
  int microBatches = 0;  ///< per step (0: Options::microBatches)
  double inFlight = 1;   ///< micro-batches whose activations the stage holds at once
  /// Per node: how many ops of the whole graph it stands for (a probe's
  /// middle layer, AutoDist.cpp problemProbe): its options' prices and the
  /// re-layouts into it are counted that often. Empty: once each.
  std::vector<double> weight;
};

/// One option of one op: replicate (ident empty) or a split over the copy.
struct OpOption {
  std::string ident;
  ops::SplitEffect effect;
  int interleave = 1; ///< a pinned interleaved cut (Constraints.h)
};

/// What a search needs of every node that no configuration changes: its
/// name in messages, the tensors a gradient flows through, the activations
/// some op saves for backward (whatever the split).
struct GraphFacts {
  std::vector<std::string> names;
  std::vector<bool> flow;
  std::vector<bool> saved;
};

/// Re-layout prices by (shape, producer layout, consumer layout): the same
/// tensors recur in every layer, so each pair is searched once.
class RelayoutCache {
public:
  RelayoutCache(const cost::Cluster &cluster);
  /// Seconds to turn `from` into `to` (RvdSearch over the comm table);
  /// a pair the search cannot convert costs kUnreachable.
  double price(const transform::RvdLayout &from, const transform::RvdLayout &to,
               int64_t elementBytes);
  static constexpr double kUnreachable = 1e6;
  /// An edge's prices per pair of options (`find` the first time), keyed by
  /// its tensor and every option's layout at both ends: the same edge of
  /// the next layer and the next configuration costs a lookup.
  const std::vector<double> &edgePrices(const std::vector<int64_t> &key,
                                        const std::function<std::vector<double>()> &find);
  int64_t searches() const { return searches_; }
  /// Whole plans found by the partition pass, kept for the same tensors in
  /// the next layer and the next configuration.
  const std::shared_ptr<transform::RvdPlanCache> &plans() const { return plans_; }
  /// The cuts of a node over `n` devices (enumerateOptions without a pinned
  /// interleave), bound from its annotation once per search, not once per
  /// configuration, stage and recompute trial.
  const std::vector<OpOption> &options(const ir::Graph &graph, const ir::Node &node, int n,
                                       bool replicateOnly);
  /// The graph's GraphFacts, found once per search (per graph).
  const GraphFacts &facts(const ir::Graph &graph);
  /// The node ranges of the graph's repeated blocks (Repeats.h
  /// instanceRanges), found once per search (per graph).
  const std::vector<std::pair<size_t, size_t>> &layerRanges(const ir::Graph &graph);
  /// The graph cut to its first `instances` repeated blocks (Probes.h),
  /// made once per search: configurations build their problems on it.
  const Probe &truncated(const ir::Graph &graph, size_t instances);

private:
  const ir::Graph *rangesOf_ = nullptr;
  std::vector<std::pair<size_t, size_t>> layerRanges_;
  std::map<size_t, std::unique_ptr<Probe>> truncated_;
  std::map<std::tuple<const ir::Graph *, int64_t, int, bool>, std::vector<OpOption>> options_;
  std::map<const ir::Graph *, GraphFacts> facts_;
  std::shared_ptr<transform::RvdPlanCache> plans_ = std::make_shared<transform::RvdPlanCache>();
  transform::RvdCostFn cost_;
  struct KeyHash {
    size_t operator()(const std::vector<int64_t> &key) const {
      uint64_t h = 1469598103934665603ull; // FNV-1a over the words
      for (int64_t v : key)
        h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  std::unordered_map<std::vector<int64_t>, double, KeyHash> prices_;
  std::unordered_map<std::vector<int64_t>, std::vector<double>, KeyHash> edges_;
  int64_t searches_ = 0;
};

/// The problem over decisions: an op that can only follow its producers
/// (every input it reads from other ops comes from one decision, and for
/// each of that decision's options one of its own options reads exactly
/// the layouts written) joins its producers' decision (nnScaler's
/// union-find of follow chains), so the solver sees tens of decisions per
/// layer, not hundreds of ops.
struct Built {
  search::Problem problem;                    ///< one node per decision, in order of first op
  std::vector<std::vector<OpOption>> options; ///< per graph node: its own options
  std::vector<int> decisionOf;                ///< per graph node
  /// Per graph node: its option under each option of its decision.
  std::vector<std::vector<int>> optionOf;
  int decisions = 0; ///< decisions with more than one option
  int ops = 0;       ///< graph nodes
  /// Set when a constraint leaves a node no option: which rule, which node.
  std::string infeasible;
  /// Per graph node: bytes its constraints add to its smallest option.
  std::vector<double> constraintRaise;
};

Built buildProblem(const ir::Graph &graph, const cost::Cluster &cluster, const Options &options,
                   const Setting &setting, RelayoutCache &cache);

} // namespace nnsc::autodist
