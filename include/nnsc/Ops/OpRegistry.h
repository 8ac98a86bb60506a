#pragma once
/// The op library: which partition annotations each operator admits.
///
/// A rule looks at one IR node (its op name, its arguments and the concrete
/// shapes of its tensor inputs and outputs) and returns the node's candidate
/// annotations in nnScaler's dimops grammar, best first. The annotation's
/// input list matches Node::inputs one to one (tensor arguments and the
/// elements of tensor-list arguments, in schema order; absent optional
/// tensors are not inputs) and its output list matches Node::outputs.
/// An empty result means replicate-only.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::ops {

using AnnotationRule =
    std::function<std::vector<std::string>(const ir::Graph &graph, const ir::Node &node)>;

class OpRegistry {
public:
  /// A registry holding the rules for the built-in aten/prim operators.
  static OpRegistry builtin();

  /// Registers (or replaces) the rule for `op`, e.g. "aten::linear".
  void add(const std::string &op, AnnotationRule rule);
  /// Registers fixed annotations for `op` (used for user custom ops).
  void addFixed(const std::string &op, std::vector<std::string> annotations);
  /// The rule for `op`, or nullptr.
  const AnnotationRule *find(const std::string &op) const;
  bool has(const std::string &op) const { return find(op) != nullptr; }
  /// Every op with a rule, sorted by name.
  std::vector<std::string> ops() const;

  /// Loads user annotations from YAML (format in docs/formats.md):
  ///   libraries: [path/to/libmyops.so]     # TORCH_LIBRARY shared objects
  ///   ops:
  ///     myops::fused_loss: ["b l d^, n^ d^, b l -> b l"]
  /// Every annotation is parsed; errors carry file:line:col.
  Status loadUserYaml(const std::string &path);
  /// As loadUserYaml, from the file's `text`; `path` names it in errors.
  Status loadUserYamlText(std::string text, const std::string &path);
  const std::vector<std::string> &userLibraries() const { return libraries_; }

private:
  std::map<std::string, AnnotationRule> rules_;
  std::vector<std::string> libraries_;
};

/// One op that got no annotation: it stays replicate-only.
struct UnannotatedOp {
  std::string op;
  std::string loc; ///< "file:line" of its first occurrence
  int count = 0;
};

/// Sets Node::annotations on every node of `graph` from `registry`, checking
/// each produced annotation against the node's shapes. Returns the ops left
/// replicate-only (one entry per op name, first location), in first-seen order.
Expected<std::vector<UnannotatedOp>> annotateGraph(ir::Graph &graph, const OpRegistry &registry);

} // namespace nnsc::ops
