#pragma once
/// User plan files (`nnsc-plan --policy file --plan-file PLAN.yaml`), the
/// format in docs/plan-files.md:
///
///   plan_ngpus: 2            # optional; --plan-ngpus must agree
///   default: follow          # replicate (default) | follow
///   zero: 1                  # optional ZeRO stage (0 | 1 | 2); --zero must agree
///   zero_ngroups: 2          # optional: ZeRO inside 2 blocks of ranks (plan.proto)
///   rules:                   # the first rule that matches a node wins
///     - module: transformer.h.*.attn.c_attn   # glob(s) over module paths
///       op: aten::linear                      # glob(s) over op names
///       node: 24                              # node id(s)
///       class: CausalSelfAttention            # glob(s) over enclosing module classes
///       nth: 2                                # the 3rd node of its op in its module
///       partition: {ident: n, interleave: 3}  # {ident, num, interleave} |
///                                             # {input, dim, num, interleave}
///                                             # | replicate | follow
///   inputs:                  # optional: graph inputs fed split
///     - {name: idx, dim: 0}  # (num: plan_ngpus)
///   stages:                  # optional: pipeline stages in order (Pipeline.h),
///     - [transformer.wte, transformer.h.0]   # module path globs per stage
///     - 'transformer.h.[1]'
///   schedule: 1f1b           # with stages: 1f1b | gpipe | interleaved
///   virtual_stages: 1        # with stages: chunks per physical stage
///   micro_batches: 4         # optional; --micro-batches must agree
///   recompute:               # optional: recompute groups (Recompute.h)
///     - transformer.h.*      # every module instance the glob matches
///     - {class: Block}       # every instance of the class
///     - {node: [12, 13]}     # these nodes, one group
///
/// Every selector given must match (they are and-ed; a list matches if any
/// element does). Unknown keys, a rule without selector or partition, and
/// bad values are errors at file:line:col; so is a rule that matched no node
/// and a partition the node's annotation forbids (naming the node, its
/// module path and source location).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/Recompute.h"
#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

enum class RuleAction {
  Replicate, ///< the node whole on every plan device
  Follow,    ///< split the way an input already is (else replicate)
  Partition  ///< split along `ident`, or the identifier at (input, dim)
};

struct PlanRule {
  SourcePos pos;                    ///< the rule's first key
  std::vector<std::string> modules; ///< globs: '*' any run of characters, '?' one
  std::vector<std::string> ops;     ///< globs over "aten::linear"
  std::vector<int64_t> nodes;
  std::vector<std::string> classes; ///< globs over the classes of enclosing modules
  int64_t nth = -1; ///< the node's place among its module's nodes of the same op; -1 any
  RuleAction action = RuleAction::Replicate;
  std::string ident; ///< Partition by identifier, or empty
  int input = -1;    ///< Partition by (input, dim) when ident is empty
  int dim = 0;
  int num = 0;        ///< parts; 0 = plan_ngpus
  int interleave = 1; ///< cut every one of this many blocks (proto NodePlan.interleave)

  /// The selectors as written: "module transformer.h.*.attn.c_attn, op aten::view".
  std::string selectorText() const;
  /// True when every selector given matches `node`, whose place among the
  /// nodes of its op in its module is `nthOfNode` (opIndexInModule).
  bool matches(const ir::Node &node, int64_t nthOfNode) const;
};

/// Per node (by index): how many earlier nodes of the same op lie directly
/// in the same module path. Stable under re-tracing, unlike node ids: the
/// third aten::view of `layers.0.self_attn` is `nth: 2` however many nodes
/// come before the layer.
std::vector<int64_t> opIndexInModule(const ir::Graph &graph);

/// A graph input fed split (plan.pb InputPlan): `inputs:` in a plan file.
struct InputRule {
  SourcePos pos;
  std::string name; ///< the graph input's argument name
  int dim = 0;
  int num = 0; ///< 0: plan_ngpus
};

/// One pipeline stage of a plan file's `stages:` list: the module path globs
/// whose modules (with everything inside them) it holds.
struct StageRule {
  SourcePos pos;
  std::vector<std::string> modules;
};

struct PlanFile {
  std::string path;
  std::string text;  ///< for error snippets
  int planNgpus = 0; ///< 0: not given
  int zero = -1;     ///< ZeRO stage; -1: not given
  int zeroNgroups = -1; ///< ZeRO's blocks of ranks; -1: not given
  RuleAction defaultAction = RuleAction::Replicate;
  std::vector<PlanRule> rules;
  std::vector<InputRule> inputs;
  /// `recompute:` recompute groups (Recompute.h): a module path glob, or a
  /// map {module: globs} | {class: names} | {node: ids} per entry.
  std::vector<RecomputeSelector> recompute;
  /// `stages:` the virtual stages in order (empty: no pipeline). A node is
  /// in the stage one of whose globs matches its module path or an enclosing
  /// module's; a node no glob matches (top-level ops) is in the stage of the
  /// node before it. Virtual stage k runs on physical stage k mod S.
  std::vector<StageRule> stages;
  SourcePos stagesPos;
  std::string schedule; ///< "" not given (1f1b, or interleaved with virtual stages)
  int virtualStages = 0; ///< 0 not given (1)
  int microBatches = 0;  ///< 0 not given
};

/// Reads and checks a plan file (syntax, keys, values; not the graph).
Expected<PlanFile> readPlanFile(const std::string &path);
/// As readPlanFile, from text; `path` names it in errors.
Expected<PlanFile> parsePlanFile(const std::string &text, const std::string &path);

/// A module path and the paths of the modules enclosing it, outermost first:
/// "h.0.attn" -> {"h", "h.0", "h.0.attn"}; "" (top-level ops) -> {}.
std::vector<std::string> enclosingModules(const std::string &modulePath);

/// fnmatch-style: '*' matches any run of characters (dots included), '?'
/// one character; everything else itself.
bool globMatch(std::string_view pattern, std::string_view text);

/// The plan the rules give `graph` over `planNgpus` devices (runtimeNgpus
/// ranks). Errors at the offending rule's position.
Expected<proto::Plan> applyPlanFile(const ir::Graph &graph, const PlanFile &file, int planNgpus,
                                    int runtimeNgpus);

/// The node ids that begin each virtual stage of `file.stages` (the first
/// is 0), for applyPipelineCuts. Errors at the stage's position: a stage
/// that holds no node, a node two stages claim, a node that belongs to an
/// earlier stage than the node before it (stages must follow graph order).
Expected<std::vector<int64_t>> planFileStageCuts(const ir::Graph &graph, const PlanFile &file);

/// The pipelined plan of a file with `stages:` over `planNgpus` devices per
/// model copy (all stages; the rules split over each stage's planNgpus / S)
/// and `runtimeNgpus` ranks: the rules per stage, then the stages' cuts.
Expected<proto::Plan> applyStagedPlanFile(const ir::Graph &graph, const PlanFile &file,
                                          int planNgpus, int runtimeNgpus);

/// A plan file (text) whose rules give `plan` again for `graph`: module-path
/// rules (layer indices generalised to '*' where every layer agrees, `nth`
/// where a module holds several nodes of one op), the input splits, ZeRO
/// and recompute groups; a pipelined plan's stages as module paths, its
/// schedule and micro-batches. The text is checked by applying it: an error if
/// it does not reproduce every node's split, devices and recompute group.
/// `header` lines are written first as comments.
Expected<std::string> writePlanFile(const ir::Graph &graph, const proto::Plan &plan,
                                    const std::vector<std::string> &header);

/// "" when `a` and `b` split every node, input and recompute group alike
/// (the policy and rule notes aside); else the first difference, e.g.
/// "node 12 aten::view: ident 'a' vs 'b'".
std::string planDifference(const proto::Plan &a, const proto::Plan &b);

} // namespace nnsc::plan
