#pragma once
/// Plan primitives: how one node is split, built and checked against its
/// partition annotation.
///
/// A NodePlan splits its node along one identifier of the node's annotation
/// (named by `ident`, or by the input and dim that carry it) into `num`
/// parts, one per listed plan device; a `+` identifier splits by value (the
/// outputs become partial sums); num 1 replicates the node on every listed
/// device. These functions build such entries and resolve them into what the
/// split does to each tensor (ops::SplitEffect). Frozen (`^`) and numeral
/// dims are never split: asking for one is an error that names the node.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// A NodePlan resolved against its node's annotation.
struct ResolvedSplit {
  std::string ident; ///< the split identifier; empty when whole
  int num = 1;
  int64_t identSize = 0; ///< full size of `ident` (0 when whole)
  ops::SplitEffect effect;
};

/// "node 24 aten::linear at transformer.h.0.attn.c_attn (model.py:72)": how
/// messages name a node (module path "<top>" when empty).
std::string describeNode(const ir::Node &node);

/// Every node's partition annotations parse: a graph.pb edited by hand (or
/// written by another build) is refused here, naming the node and the text,
/// instead of its node silently planned as replicate-only.
Status checkAnnotations(const ir::Graph &graph);

/// The first of the node's candidate annotations that binds to its shapes.
/// Errors: no annotation (replicate-only), none binds.
Expected<ops::BoundAnno> bindNode(const ir::Graph &graph, const ir::Node &node);

/// What `np` does to `node`'s tensors. num <= 1: every tensor whole.
/// Errors (without the node's name; callers add describeNode): a
/// replicate-only op split, an unknown / frozen / numeral identifier, a size
/// that does not divide.
Expected<ResolvedSplit> resolveSplit(const ir::Graph &graph, const ir::Node &node,
                                     const proto::NodePlan &np);

/// Ok unless `effect` splits `node` along a plain (not `+`) identifier that
/// none of its outputs has: the parts would then be claimed to compute equal
/// outputs from different data. Only the graph's loss node may do that (each
/// part's loss is weighed by its share; Transform/Partition.h LossInfo).
/// The error names the identifier and says how to annotate it.
Status checkSplitOutputs(const ir::Graph &graph, const ir::Node &node,
                         const ops::SplitEffect &effect, const std::string &ident);

/// resolveSplit's effect only.
Expected<ops::SplitEffect> nodeSplitEffect(const ir::Graph &graph, const ir::Node &node,
                                           const proto::NodePlan &np);

/// `node` whole on each of `devices` (one copy each); stage 0, no recompute.
proto::NodePlan replicateNode(const ir::Node &node, const std::vector<int> &devices,
                              const std::string &rule);

/// `node` split along identifier `ident` into devices.size() parts, part i
/// on devices[i], interleaved over `interleave` blocks of the identifier
/// when > 1 (ops::SplitEffect). Errors name the node (describeNode) and say
/// why.
Expected<proto::NodePlan> splitNodeByIdent(const ir::Graph &graph, const ir::Node &node,
                                           const std::string &ident,
                                           const std::vector<int> &devices, const std::string &rule,
                                           int interleave = 1);

/// As splitNodeByIdent, the identifier being the one at input `input`, dim
/// `dim` (negative dims count from the end), recorded as input/dim.
Expected<proto::NodePlan> splitNodeByDim(const ir::Graph &graph, const ir::Node &node, int input,
                                         int dim, const std::vector<int> &devices,
                                         const std::string &rule, int interleave = 1);

/// Devices 0 .. n-1.
std::vector<int> firstDevices(int n);

} // namespace nnsc::plan
