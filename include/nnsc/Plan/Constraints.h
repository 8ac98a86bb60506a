#pragma once
/// autodist constraints (`nnsc-plan --policy autodist --constraints FILE`),
/// the format in docs/autodist.md:
///
///   constraints:                  # every rule that matches a node applies
///     - module: 'layers.*.mlp.*'  # selectors as in plan files: module, op,
///       op: aten::linear          # node, class, nth (PlanFile.h)
///       allow: [n, k]             # identifiers the search may split along
///       replicate: false          # whole on every device not allowed
///     - class: LlamaRMSNorm
///       pin: replicate            # the only option: whole
///     - module: lm_head
///       pin: {ident: n}           # the only option: this split
///
/// The rules matching a node are and-ed. Errors at file:line:col: unknown
/// keys, bad values, a rule that selects no node, a pin the node's
/// annotation forbids; autodist names the rule and node when a rule leaves
/// a node no option.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/PlanFile.h"
#include "nnsc/Support/Status.h"

namespace nnsc::plan {

struct ConstraintRule {
  PlanRule select; ///< selectors and position (its partition unused)
  /// Identifiers a split may use; nullopt: any.
  std::optional<std::set<std::string>> allow;
  bool replicate = true; ///< whole allowed
  bool pinned = false;   ///< `pin`: exactly one option
  std::string pinIdent;  ///< pinned split ("" with pinned: replicate)
  int pinInterleave = 1;

  /// "constraints.yaml:4:5 (module lm_head)": for messages.
  std::string where() const;
};

struct Constraints {
  std::string path;
  std::string text; ///< for error snippets
  std::vector<ConstraintRule> rules;
};

/// What the rules leave one node.
struct NodeConstraint {
  bool replicate = true;
  std::optional<std::set<std::string>> allow; ///< nullopt: any identifier
  int interleave = 0;                         ///< a pinned split's; 0 any
  std::vector<int> rules;                     ///< indices of the rules that matched

  bool constrained() const { return !rules.empty(); }
  /// True when the option (ident "" = whole) is allowed.
  bool allows(const std::string &ident) const {
    return ident.empty() ? replicate : (!allow || allow->count(ident) > 0);
  }
};

Expected<Constraints> readConstraints(const std::string &path);
/// As readConstraints, from text; `path` names it in errors.
Expected<Constraints> parseConstraints(const std::string &text, const std::string &path);

/// Per graph node (by index): what the rules leave it. Errors (at the rule):
/// a rule that matched no node; a pinned identifier the node's annotation
/// does not have.
Expected<std::vector<NodeConstraint>> constrainNodes(const ir::Graph &graph,
                                                     const Constraints &constraints);

/// "" when `plan` obeys the constraints, else which node breaks which rule.
std::string constraintViolation(const ir::Graph &graph, const proto::Plan &plan,
                                const Constraints &constraints,
                                const std::vector<NodeConstraint> &nodes);

} // namespace nnsc::plan
