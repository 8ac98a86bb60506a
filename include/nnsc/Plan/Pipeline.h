#pragma once
/// Pipeline stages in plans (docs/pipeline.md).
///
/// A pipelined plan cuts the graph's node order into S x v consecutive
/// *virtual stages* at pipeline pivots (the instances of a repeated module
/// class: transformer layers), balancing their cost; virtual stage k runs on
/// physical stage k mod S, whose devices are k mod S times T .. + T - 1 (T
/// devices per stage, the base policy's plan inside each). With v > 1 every
/// physical stage holds v model chunks (interleaved 1F1B, Megatron's virtual
/// pipeline). plan.stages lists the virtual stages and their devices; every
/// NodePlan names its virtual stage.

#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// The most pipeline stages (physical, and virtual per physical) a plan may have.
constexpr int kMaxPipelineStages = 1024;
constexpr int kMaxVirtualStages = 64;

/// The schedules a pipelined plan may name.
inline const std::vector<std::string> &pipelineSchedules() {
  static const std::vector<std::string> all = {"1f1b", "gpipe", "interleaved"};
  return all;
}

struct PipelineOptions {
  int stages = 1;        ///< physical stages S
  int virtualStages = 1; ///< model chunks per physical stage v (interleaved)
  std::string schedule = "1f1b";
  /// Module classes whose instances start a candidate cut; empty: the class
  /// with the most numbered instances (ModuleList items such as h.0, h.1).
  std::vector<std::string> pivots;
};

/// Checks the option values alone (S >= 1, v >= 1, a known schedule, v > 1
/// only with "interleaved" and "interleaved" only with v > 1).
Status checkPipelineOptions(const PipelineOptions &options);

/// Turns `plan`, made by a policy over T = plan.plan_ngpus() devices with
/// runtime_ngpus / S ranks, into the pipelined plan over S * T devices:
/// stage per node, devices shifted to the node's physical stage, stages,
/// schedule, runtime_ngpus times S. Errors: fewer pivot instances than the
/// stages need, a pivot class the graph lacks.
Status applyPipeline(const ir::Graph &graph, const PipelineOptions &options, proto::Plan &plan);

/// The node ids where an instance of a pivot class begins, after the first
/// node: the places a pipeline may be cut (`pivots` empty: the class with
/// the most numbered instances). Errors: no such class in the graph.
Expected<std::vector<int64_t>> pivotStarts(const ir::Graph &graph,
                                           std::vector<std::string> pivots);

/// The cuts applyPipeline makes: the node ids that begin each of the S x v
/// virtual stages (the first is 0), at pivot starts, balancing the nodes'
/// forward and backward cost. Errors: as applyPipeline's.
Expected<std::vector<int64_t>> pipelineCuts(const ir::Graph &graph,
                                            const PipelineOptions &options);

/// applyPipeline with the cuts given (`cuts` from pipelineCuts or chosen
/// otherwise: ascending, the first 0, S x v of them).
void applyPipelineCuts(const PipelineOptions &options, const std::vector<int64_t> &cuts,
                       proto::Plan &plan);

/// The cut positions (node ids that begin a virtual stage, the first is 0)
/// of `count` stages over `cost` (per node), cut only before nodes in
/// `candidates` (ascending), minimising the largest stage's cost. Errors when
/// there are too few candidates.
Expected<std::vector<int64_t>> balancedCuts(const std::vector<double> &cost,
                                            const std::vector<int64_t> &candidates, int count);

/// Checks the stages of a validated plan: every stage on the same number of
/// devices, each node's devices inside its stage's, and no tensor flowing to
/// an earlier stage (errors name both nodes).
Status checkPipelineStages(const proto::Plan &plan, const ir::Graph &graph);

/// Physical stages of a plan (stages with distinct device sets), 1 when it is
/// not pipelined.
int physicalStages(const proto::Plan &plan);

} // namespace nnsc::plan
