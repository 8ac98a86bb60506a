#pragma once
// How tensors are split while a policy builds a plan node by node, and the
// "follow" rule that splits a node the way its inputs already are (shared by
// the data and file policies; private to nnsc_plan).

#include <optional>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// One tensor's split: `num` parts along `dim` (-1 and num 1: whole),
/// interleaved over `blocks` blocks of that dim (ops::SplitEffect), or `num`
/// partial sums when `partial`.
struct TensorSplit {
  int dim = -1;
  int num = 1;
  bool partial = false;
  int64_t blocks = 1;
};

class SplitTracker {
public:
  explicit SplitTracker(const ir::Graph &graph) : splits_(graph.tensors().size()) {}

  /// A graph input fed in `num` parts along `dim`.
  void setInput(int64_t tensor, int dim, int num) { splits_.at(tensor) = {dim, num, false, 1}; }
  /// Records what `effect` (the split of `np`) makes of the node's outputs.
  void record(const ir::Node &node, const proto::NodePlan &np, const ops::SplitEffect &effect);
  const TensorSplit &of(int64_t tensor) const { return splits_.at(tensor); }

private:
  std::vector<TensorSplit> splits_;
};

/// The split of `node` that keeps an input's split: for the first input
/// split along some dim into devices.size() parts where a member of that
/// dim's annotation splits the node the same way (same dim, same blocks; the
/// leading member first, then interleaved ones), `node` split along that
/// identifier on `devices`. nullopt when no input allows it (partial sums
/// never do).
std::optional<proto::NodePlan> followInputs(const ir::Graph &graph, const ir::Node &node,
                                            const SplitTracker &tracker,
                                            const std::vector<int> &devices,
                                            const std::string &rule);

/// A plan with the common envelope filled in: policy, device counts, one
/// stage over devices 0 .. planNgpus-1.
proto::Plan newPlan(const std::string &policy, int planNgpus, int runtimeNgpus);

/// Appends `np` to `plan` and records its effect in `tracker`.
Status addNodePlan(const ir::Graph &graph, const ir::Node &node, proto::NodePlan np,
                   proto::Plan &plan, SplitTracker &tracker);

} // namespace nnsc::plan
