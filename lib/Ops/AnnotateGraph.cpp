// annotateGraph: runs the registry's rule on every node and checks what it
// returns against the node's shapes.
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "FixedAnnotations.h"
#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Ops/OpRegistry.h"

namespace nnsc::ops {
namespace {

struct NodeShapes {
  std::vector<ir::Shape> ins, outs;
};

NodeShapes shapesOf(const ir::Graph &graph, const ir::Node &node) {
  NodeShapes s;
  for (int64_t id : node.inputs)
    s.ins.push_back(graph.tensor(id).shape);
  for (int64_t id : node.outputs)
    s.outs.push_back(graph.tensor(id).shape);
  return s;
}

std::string shapeList(const std::vector<ir::Shape> &shapes) {
  std::vector<std::string> parts;
  for (const ir::Shape &s : shapes)
    parts.push_back(ir::shapeString(s));
  return fmt::format("({})", fmt::join(parts, ", "));
}

/// Parses `text` (candidates may be joined by '|') and binds each candidate;
/// returns the canonical texts of those that bind, and the first failure.
std::vector<std::string> bindingCandidates(const std::string &text, const NodeShapes &shapes,
                                           std::string &firstError) {
  std::vector<std::string> ok;
  Expected<std::vector<OpAnno>> parsed = parseCandidates(std::string_view(text));
  if (!parsed) {
    firstError = firstError.empty() ? parsed.status().message() : firstError;
    return ok;
  }
  for (const OpAnno &anno : *parsed) {
    Expected<BoundAnno> bound = bindShapes(anno, shapes.ins, shapes.outs);
    if (bound)
      ok.push_back(anno.text());
    else if (firstError.empty())
      firstError = fmt::format("'{}': {}", anno.text(), bound.status().message());
  }
  return ok;
}

/// A built-in rule must only give annotations that fit: anything else is a
/// bug in the rule.
Expected<std::vector<std::string>> checkBuiltin(const std::vector<std::string> &annos,
                                                const ir::Node &node, const NodeShapes &shapes) {
  std::vector<std::string> out;
  for (const std::string &text : annos) {
    std::string why;
    std::vector<std::string> ok = bindingCandidates(text, shapes, why);
    if (!why.empty())
      return Status::internal(fmt::format(
          "{}: error: the built-in rule for '{}' gave the annotation '{}', which does not fit "
          "inputs {} and outputs {}: {}",
          node.locString(), node.op, text, shapeList(shapes.ins), shapeList(shapes.outs), why));
    out.insert(out.end(), ok.begin(), ok.end());
  }
  return out;
}

/// User annotations are candidates: those that fit are kept, in order; none
/// fitting is the user's error.
Expected<std::vector<std::string>> checkUser(const std::vector<std::string> &annos,
                                             const ir::Node &node, const NodeShapes &shapes) {
  std::vector<std::string> out;
  std::string why;
  for (const std::string &text : annos) {
    std::vector<std::string> ok = bindingCandidates(text, shapes, why);
    out.insert(out.end(), ok.begin(), ok.end());
  }
  if (out.empty() && !annos.empty())
    return Status::error(
        fmt::format("{}: error: no annotation given for '{}' fits inputs {} and outputs {}: {}",
                    node.locString(), node.op, shapeList(shapes.ins), shapeList(shapes.outs), why));
  return out;
}

/// Runs `rule` on `node`; an exception escaping a rule is an internal error.
Expected<std::vector<std::string>> runRule(const AnnotationRule &rule, const ir::Graph &graph,
                                           const ir::Node &node) {
  try {
    return rule(graph, node);
  } catch (const std::exception &e) {
    return Status::internal(fmt::format("{}: error: the rule for '{}' failed: {}", node.locString(),
                                        node.op, e.what()));
  }
}

Expected<std::vector<std::string>> annotationsFor(const AnnotationRule &rule,
                                                  const ir::Graph &graph, const ir::Node &node) {
  Expected<std::vector<std::string>> annos = runRule(rule, graph, node);
  if (!annos)
    return annos;
  NodeShapes shapes = shapesOf(graph, node);
  if (rule.target<FixedAnnotations>())
    return checkUser(*annos, node, shapes);
  return checkBuiltin(*annos, node, shapes);
}

} // namespace

Expected<std::vector<UnannotatedOp>> annotateGraph(ir::Graph &graph, const OpRegistry &registry) {
  std::vector<UnannotatedOp> missing;
  std::map<std::string, size_t> slot; // op -> index into missing
  for (ir::Node &node : graph.nodes()) {
    node.annotations.clear();
    if (const AnnotationRule *rule = registry.find(node.op)) {
      Expected<std::vector<std::string>> annos = annotationsFor(*rule, graph, node);
      if (!annos)
        return annos.status();
      node.annotations = annos.take();
    }
    if (!node.annotations.empty())
      continue;
    auto [it, isNew] = slot.emplace(node.op, missing.size());
    if (isNew)
      missing.push_back(UnannotatedOp{node.op, node.locString(), 0});
    ++missing[it->second].count;
  }
  return missing;
}

} // namespace nnsc::ops
