#pragma once
/// autodist: the plan search (nnsc-plan --policy autodist, docs/autodist.md).
///
/// For every configuration of the copy -- devices per copy T (a divisor of
/// the runtime's devices, or the one given), ZeRO stage, recompute groups --
/// the search prices each op's options (replicate, or a split along any
/// identifier its annotation allows over the copy's T devices) with the cost
/// model: compute from the op costs on the option's local shapes, memory
/// from what the option holds (parameter, gradient and optimizer bytes of
/// the weights it reads first, activations it saves), the gradient
/// reductions of those weights (inside the copy and over the data-parallel
/// copies); and every producer/consumer pair's re-layout, forward and
/// backward, from the RVD search priced by the comm table. The exact
/// dynamic program of Search/Solver.h picks the cheapest assignment within
/// the memory limit. Each found plan is then partitioned and priced whole
/// (Transform/StepCost.h, Plan/Memory.h): a plan whose exact memory passes
/// the limit is searched again under a limit lowered by the excess, and the
/// configurations are compared by predicted time per sample.
///
/// Lives above Transform (it needs the RVD search and the step model) and
/// below the tools; the solver it calls sees only numbers.
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "nnsc/Cost/Cluster.h"
#include "nnsc/Cost/Memory.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/Constraints.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::autodist {

/// The ILP cross-check's tally (Options::ilpCheck): every problem the
/// dynamic program solved whole (not folded) solved again by CBC.
struct IlpCheck {
  int problems = 0;  ///< solved by both
  int agree = 0;     ///< the same optimum within 1e-9 (relative)
  int folded = 0;    ///< solved folded: CBC sees the whole problem, not compared
  double worst = 0;  ///< largest (dp - ilp) / ilp
  double dpSeconds = 0;
  double ilpSeconds = 0;
  std::vector<std::string> failures; ///< CBC's errors where the DP found a plan, or the reverse
};

struct Options {
  int runtimeNgpus = 1;
  /// Devices per model copy; 0: choose among the divisors of runtimeNgpus.
  int planNgpus = 0;
  int microBatches = 1; ///< per optimizer step (gradient accumulation)
  /// Bytes per device a plan may use; 0: memFraction of the device's memory.
  double memLimit = 0;
  double memFraction = 0.8; ///< nnScaler's default share of the device
  /// ZeRO stage; -1: choose (1 only where stage 0 does not fit).
  int zero = -1;
  /// ZeRO in blocks of ranks (plan zero_ngroups, docs/zero.md): with ZeRO on,
  /// only configurations whose copies divide into this many blocks, each
  /// sharding over its own copies.
  int zeroNgroups = 1;
  /// Recompute: Auto picks module instances of the repeated block class
  /// when nothing fits without them (the fewest layers that make it fit);
  /// None never; Modules: every instance of the named classes.
  enum class Recompute { Auto, None, Modules } recompute = Recompute::Auto;
  std::vector<std::string> recomputeModules;
  cost::MemoryOptions memory; ///< optimizer and precision (zero, dpSize set per configuration)
  std::string graphPath;      ///< recorded in the plan
  /// Points of each (memory, time) Pareto set the dynamic program keeps
  /// (Search/Solver.h DpLimits): past it a set is thinned evenly over
  /// memory. The memory limit stays exact: every plan found is priced whole
  /// and searched again under a lower limit where it does not fit.
  int64_t paretoPoints = 64;
  /// Solve the repeated blocks (transformer layers) once, every instance
  /// taking the first's options (Search/Repeated.h): the search time does
  /// not grow with depth. false: every op of every layer on its own (layers
  /// may differ; slower).
  bool foldRepeats = true;
  /// Build, solve and price every configuration on the whole graph. false
  /// (the default): a configuration whose repeated layers come in runs of
  /// alike instances is built on three of each run and its found plan priced
  /// on two and one more, the rest counted (AutoDist.cpp problemProbe,
  /// Pricing.cpp), so neither grows with depth.
  bool wholeGraph = false;
  /// A constraints file (Plan/Constraints.h): the options each op may take;
  /// the seed policies' plans must obey it too.
  std::optional<plan::Constraints> constraints;
  /// Samples per optimizer step over every copy, in traced micro-batches; a
  /// configuration of dp copies then runs globalBatch / dp micro-batches per
  /// copy (fewer copies, more micro-batches: a smaller pipeline bubble).
  /// 0: microBatches per copy whatever the copies.
  int globalBatch = 0;
  /// Pipeline stages: 0 none; -1 choose (every count dividing the devices
  /// that the pivots allow, beside no pipeline); S exactly S.
  int pipelineStages = 0;
  /// The pipeline's schedule (1f1b, gpipe, interleaved with virtualStages).
  std::string schedule = "1f1b";
  int virtualStages = 1;
  std::vector<std::string> pipelinePivots; ///< empty: the most-numbered module class
  /// Pipelines: the most configurations tried with stage boundaries moved
  /// off the balanced cut, one pivot at a time, for the best configuration
  /// and the nearest miss of the limit (0: keep the balanced cut).
  int cutMoves = 8;
  /// When set, every problem is also solved by CBC (search::solveIlp) and
  /// the two optima compared (nnsc-plan --ilp-check).
  std::shared_ptr<IlpCheck> ilpCheck;
};

/// One configuration the search tried, with its exact prices.
struct Trial {
  int planNgpus = 1; ///< devices per copy, or per pipeline stage
  int stages = 1;    ///< pipeline stages (each planNgpus devices)
  int microBatches = 1; ///< per copy and step
  int dp = 1;
  int zero = 0;
  int recomputeLayers = 0; ///< module instances recomputed
  std::string source;      ///< "search", or a seed policy's name
  bool fits = false;
  std::string why;              ///< when it does not fit or failed: the reason
  double stepSeconds = 0;       ///< predicted step (slowest device)
  /// step / (micro-batches x dp copies): what configurations are compared on
  double secondsPerSample = 0;
  double bubbleSeconds = 0; ///< pipelines: the slowest device's waiting in its schedule
  double memoryBytes = 0;       ///< the largest device's estimate
  double searchSeconds = 0;     ///< building and solving this configuration
  int ops = 0;                  ///< graph nodes
  int decisions = 0;            ///< decisions with more than one option (followers merged)
  int64_t states = 0;           ///< the dynamic program's largest frontier
  /// Where a constraints file costs this configuration memory: the op it
  /// keeps furthest above its smallest option.
  std::string constraintNote;
  bool folded = false; ///< the repeated blocks were solved once
  /// Pipelines: pivot instances (layers) per virtual stage, "20+20", and the
  /// balanced cut's when the search moved the boundaries ("" otherwise).
  std::string layers;
  std::string balancedLayers;
};

struct Result {
  proto::Plan plan; ///< the best trial's plan (common fields not stamped)
  std::vector<Trial> trials;
  int chosen = -1;
  double memLimit = 0;
  std::string recomputeClass; ///< the module class recompute picks from ("" none)
  int recomputeInstances = 0;
  std::vector<std::string> notes; ///< why ZeRO or recompute were chosen
  double totalSeconds = 0;
  std::shared_ptr<IlpCheck> ilpCheck; ///< Options::ilpCheck's tally, when asked
};

/// Searches a plan for `graph` on `cluster` (which must have a comm table).
/// Errors: impossible options (planNgpus not dividing runtimeNgpus), no
/// configuration fits the limit (the message gives the least memory any
/// needs and what the limit is).
Expected<Result> search(const ir::Graph &graph, const cost::Cluster &cluster,
                        const Options &options);

/// The text report: the configurations tried (exact time and memory), the
/// choice and why, and the chosen plan's split of each op class.
void printReport(const Result &result, const ir::Graph &graph, const cost::Cluster &cluster,
                 std::ostream &os);

} // namespace nnsc::autodist
