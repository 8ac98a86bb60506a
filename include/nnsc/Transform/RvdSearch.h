#pragma once
/// The cheapest sequence of primitives from a producer's RVD layout to a
/// consumer's, over the same device set.
///
/// A Dijkstra search whose states are placements (RVD counts plus which
/// device holds which piece, up to the R/V relabelings of RvdLayout.h) and
/// whose edges are the primitives of RvdPrimitive.h, each priced by a
/// pluggable cost function. Besides the plain member grouping, moves out of
/// R or V also try the regroupings of regroupAxis (nnScaler tries the same
/// "inner transposes"). So that every consumer placement is reachable, a
/// fully replicated state also has an edge straight to the consumer made of
/// local steps only (value_split, then chunk per dim), as nnScaler's backup
/// path through a full replica. The optimum is over these moves, not over
/// every permutation of devices.
///
/// Ties (costs equal within a relative 1e-9) go to fewer steps, then to the
/// first found; moves are tried in a fixed order, so plans are deterministic.

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "nnsc/Support/Status.h"
#include "nnsc/Transform/RvdCost.h"
#include "nnsc/Transform/RvdLayout.h"
#include "nnsc/Transform/RvdPrimitive.h"

namespace nnsc::transform {

class RvdPlanCache;

struct RvdSearchOptions {
  /// Bytes of one tensor element (4 for float32).
  int64_t elementBytes = 4;
  /// Cost of a step; empty means defaultRvdCost().
  RvdCostFn cost;
  /// The search fails rather than visit more placements than this.
  int64_t maxStates = 200000;
  /// Where given, plans found are kept and found again (failures are not).
  std::shared_ptr<RvdPlanCache> cache;
};

/// Steps that turn `producer` into (a layout equivalent to) `consumer`.
struct RvdPlan {
  RvdLayout producer;
  RvdLayout consumer;
  std::vector<RvdStep> steps;
  /// Sum of the steps' costs.
  double cost = 0;
};

/// Found plans by (producer, consumer, element bytes), for callers that
/// search the same pairs again and again (a model's layers): one cache per
/// cost function and search limits. Not thread-safe.
class RvdPlanCache {
public:
  /// The plan kept under `key`, or nullptr; counts hits and misses.
  const RvdPlan *find(const std::string &key);
  void insert(std::string key, RvdPlan plan) { plans_.emplace(std::move(key), std::move(plan)); }
  int64_t misses() const { return misses_; }
  int64_t hits() const { return hits_; }

private:
  std::unordered_map<std::string, RvdPlan> plans_;
  int64_t misses_ = 0, hits_ = 0;
};

/// Finds the cheapest plan; an empty one when the layouts are equivalent.
/// Errors: different tensor shapes; different device sets ("cross-device-set
/// layouts not supported yet"); elementBytes < 1; the search passing
/// maxStates.
Expected<RvdPlan> searchRvdPlan(const RvdLayout &producer, const RvdLayout &consumer,
                                const RvdSearchOptions &options = {});

/// The steps that turn the fully replicated layout on consumer's devices into
/// `consumer` with local primitives only: value_split (if V > 1), then chunk
/// for each dim with D > 1; empty if consumer is fully replicated. Steps are
/// priced with `cost` and `elementBytes`.
Expected<std::vector<RvdStep>> localStepsFromReplica(const RvdLayout &consumer,
                                                     int64_t elementBytes, const RvdCostFn &cost);

/// "reduce_scatter V->D0 x2 [0,1] [2,3] => R1V2D2 (64 B/device, cost 1.5e-05)".
std::string formatRvdStep(const RvdStep &step);

/// The producer and consumer with their devices, the step count and total
/// cost on one line, then one numbered line per step.
std::string formatRvdPlan(const RvdPlan &plan);

} // namespace nnsc::transform
