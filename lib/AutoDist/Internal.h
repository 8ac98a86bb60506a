#pragma once
// What autodist's outer searches share (private to nnsc_autodist): the
// configuration loop in AutoDist.cpp and the pipeline search in
// PipelineSearch.cpp.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "Problem.h"
#include "Repeats.h"
#include "nnsc/AutoDist/AutoDist.h"
#include "nnsc/Plan/Recompute.h"

namespace nnsc::autodist {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0);

/// "1.752 ms", "876.1 us", "2.013 s": the reports' times (Report.cpp).
std::string formatSeconds(double s);

/// Recompute groups per node for the given selectors (none: all -1).
Expected<std::vector<int>> recomputeGroups(const ir::Graph &graph,
                                           const std::vector<plan::RecomputeSelector> &selectors);
/// A selector of exactly these module instances (none: empty).
std::vector<plan::RecomputeSelector> instancesSelector(const std::vector<std::string> &paths);

/// The recompute selectors of a configuration: every instance of
/// --recompute-modules' classes when named, else exactly `instances`.
std::vector<plan::RecomputeSelector> recomputeSelectors(const Options &options,
                                                        const std::vector<std::string> &instances);

/// Solves `p` with the repeated layers folded (`rep` non-empty) or whole;
/// where the fold has too many ways into the next layer, whole. `folded` says
/// which it was.
Expected<search::Solution> solveFoldable(const search::Problem &p, const std::vector<int> &rep,
                                         const Options &options, bool &folded);

/// Micro-batches per copy for dp copies (Options::globalBatch); 0 where the
/// global batch does not split over them.
int microBatchesFor(const Options &options, int dp);

/// Node k's option under a solution of `built`.
const OpOption &chosenOption(const Built &built, const std::vector<int> &choice, size_t k);

/// The plan over planNgpus devices (one stage) with every node's option.
struct PlanShape {
  int planNgpus = 1;
  int runtimeNgpus = 1;
  int microBatches = 1;
  int zero = 0;
  int zeroNgroups = 1; ///< ZeRO's blocks of ranks (plan zero_ngroups)
};

/// The blocks ZeRO stage `zero` shards in under `options` (1: all copies).
inline int zeroBlocks(const Options &options, int zero) {
  return zero >= 1 && options.zeroNgroups > 1 ? options.zeroNgroups : 1;
}
/// Whether `dp` copies split into those blocks.
inline bool zeroSplits(const Options &options, int zero, int dp) {
  return dp % zeroBlocks(options, zero) == 0;
}
Expected<proto::Plan> materialize(const ir::Graph &graph, const PlanShape &shape,
                                  const std::function<const OpOption &(size_t)> &optionOf,
                                  const std::vector<int> &recomputeGroup);

/// A plan's exact prices: partitioned, every device's step (pipelines: their
/// schedule) and memory.
struct Priced {
  double step = 0;   ///< the slowest device's
  double memory = 0; ///< the largest device's
  double bubble = 0; ///< the slowest device's waiting in its pipeline schedule
  std::vector<double> deviceMemory; ///< per plan device
};
Expected<Priced> price(const ir::Graph &graph, const proto::Plan &plan,
                       const cost::Cluster &cluster, const Options &options, RelayoutCache &cache);

struct Outcome {
  Trial trial;
  proto::Plan plan;
  /// The least memory per device of any plan the problem holds (0: none
  /// was built): the lower bound the recompute count is aimed with.
  double leastBytes = 0;
};

/// Records a priced plan in `out` (step, memory, pipeline waiting, the plan)
/// and whether it fits `limit`; returns that.
bool takePriced(Outcome &out, proto::Plan plan, const Priced &priced, double limit);

/// The most devices that --plan-ngpus auto splits one copy (or one pipeline
/// stage) over, at most `devices`: no wider than a node, as Megatron-LM keeps
/// tensor parallelism, since a split op's collectives then cross the links
/// between nodes every layer (an explicit --plan-ngpus goes past it), and no
/// wider than the graph's largest dim, past which every op is replicated (the
/// work of one device, with fewer copies: never better). Pricing the wide
/// copies is what grows with the device count: on 64 devices a tiny GPT's
/// search took 106 s with them.
int widestSplit(const ir::Graph &graph, const cost::Cluster &cluster, int devices);

/// The pipelined configurations (PipelineSearch.cpp): for every stage count
/// S the options allow and every T devices per stage dividing N / S, the
/// graph cut at pivots into S balanced stages, each stage searched on its
/// own (its activations times the micro-batches its schedule keeps in
/// flight, ZeRO and recompute where it does not fit), the stages' plans
/// joined and priced whole. Errors: a pivot class the graph lacks, or
/// options no stage count can meet.
Expected<std::vector<Outcome>> searchPipelines(const ir::Graph &graph, const cost::Cluster &cluster,
                                               const Options &options, double limit,
                                               RelayoutCache &cache, const RepeatedBlocks &blocks,
                                               const std::vector<plan::NodeConstraint> *constrained);

/// The largest product of option counts alive at once (the DP's frontier).
int64_t largestFrontier(const search::Problem &p);

} // namespace nnsc::autodist
