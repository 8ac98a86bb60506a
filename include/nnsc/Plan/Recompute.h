#pragma once
/// Activation recompute groups: which nodes run again in backward instead of
/// keeping their activations (plan.pb NodePlan.recompute_group).
///
/// Groups are chosen by module class (`nnsc-plan --recompute-modules
/// Block,LlamaDecoderLayer`, as nnScaler's recompute_modules), by module path
/// glob or by node id (a plan file's `recompute:` list, docs/plan-files.md).
/// Every module instance a selector picks is a group of its own: with
/// `Block`, transformer.h.0 is group 0 and transformer.h.1 group 1. A node
/// belongs to the outermost enclosing module a selector picks; the first
/// selector (in order) that picks a node decides. Groups are numbered in node
/// order. The rank programs run each group through nnsc.recompute
/// (docs/recompute.md).

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

struct RecomputeSelector {
  enum Kind { ModulePath, ModuleClass, Nodes } kind = ModulePath;
  std::vector<std::string> patterns; ///< path globs (ModulePath) or class names (ModuleClass)
  std::vector<int64_t> nodes;        ///< Nodes: one group of these node ids
  SourcePos pos;                     ///< where a plan file gave it; file empty: the command line

  /// "module transformer.h.*", "class Block|LlamaDecoderLayer", "node 3|4".
  std::string text() const;
};

/// Puts the nodes that `selectors` pick, among those with no group yet
/// (recompute_group -1), into new groups numbered after the plan's largest.
/// `fileText` (the plan file's text) gives errors a snippet. Errors: a
/// selector that picks no node (for the command line's classes: when none of
/// them names a module of the graph), a node id outside the graph.
Status assignRecomputeGroups(const ir::Graph &graph,
                             const std::vector<RecomputeSelector> &selectors, proto::Plan &plan,
                             const std::string &fileText = "");

/// "transformer.h.0 (Block)": the module every node of group `group` lies in
/// (the innermost common enclosing module), or "nodes 3..7" when they share
/// none. For comments and messages.
std::string describeRecomputeGroup(const ir::Graph &graph, const proto::Plan &plan, int group);

} // namespace nnsc::plan
