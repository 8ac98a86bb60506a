// Recompute groups from module classes, module path globs and node lists
// (Recompute.h).
#include "nnsc/Plan/Recompute.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nnsc/Plan/PlanFile.h"

namespace nnsc::plan {

namespace {

// The node's enclosing module calls, outermost first. Graphs traced before
// module stacks were recorded give the path's dotted prefixes, the class
// known only for the innermost.
std::vector<ir::ModuleFrame> framesOf(const ir::Node &node) {
  if (!node.moduleStack.empty())
    return node.moduleStack;
  std::vector<ir::ModuleFrame> frames;
  if (node.modulePath.empty())
    return frames;
  for (size_t dot = node.modulePath.find('.'); dot != std::string::npos;
       dot = node.modulePath.find('.', dot + 1))
    frames.push_back({node.modulePath.substr(0, dot), ""});
  frames.push_back({node.modulePath, node.moduleClass});
  return frames;
}

bool framePicked(const RecomputeSelector &s, const ir::ModuleFrame &f) {
  for (const std::string &p : s.patterns)
    if (s.kind == RecomputeSelector::ModuleClass ? f.cls == p : globMatch(p, f.path))
      return true;
  return false;
}

// The group key of `node` under `s` ("" when s does not pick it): the path
// of the outermost picked module, or the selector's index for node lists.
std::string keyOf(const RecomputeSelector &s, size_t index, const ir::Node &node) {
  if (s.kind == RecomputeSelector::Nodes)
    return std::find(s.nodes.begin(), s.nodes.end(), node.id) != s.nodes.end()
               ? fmt::format("#{}", index)
               : "";
  for (const ir::ModuleFrame &f : framesOf(node))
    if (framePicked(s, f))
      return f.path;
  return "";
}

std::set<std::string> classesOf(const ir::Graph &graph) {
  std::set<std::string> classes;
  for (const ir::Node &node : graph.nodes())
    for (const ir::ModuleFrame &f : framesOf(node))
      if (!f.cls.empty())
        classes.insert(f.cls);
  return classes;
}

Status selectorError(const ir::Graph &graph, const RecomputeSelector &s,
                     const std::string &fileText, const std::string &what) {
  std::string msg = fmt::format("recompute selector '{}' {}", s.text(), what);
  if (s.kind == RecomputeSelector::ModuleClass)
    msg += fmt::format("; module classes of {}: {}", graph.name, fmt::join(classesOf(graph), ", "));
  if (s.pos.file.empty())
    return Status::error("error: " + msg);
  return Status::error(formatErrorWithSnippet(s.pos, msg, fileText));
}

} // namespace

std::string RecomputeSelector::text() const {
  if (kind == Nodes)
    return fmt::format("node {}", fmt::join(nodes, "|"));
  return fmt::format("{} {}", kind == ModuleClass ? "class" : "module", fmt::join(patterns, "|"));
}

Status assignRecomputeGroups(const ir::Graph &graph,
                             const std::vector<RecomputeSelector> &selectors, proto::Plan &plan,
                             const std::string &fileText) {
  int next = 0;
  for (const proto::NodePlan &np : plan.nodes())
    next = std::max(next, np.recompute_group() + 1);
  for (const RecomputeSelector &s : selectors)
    for (int64_t id : s.nodes)
      if (id < 0 || id >= static_cast<int64_t>(graph.nodes().size()))
        return selectorError(
            graph, s, fileText,
            fmt::format("names node {}, outside 0..{}", id, graph.nodes().size() - 1));
  std::map<std::string, int> groups; // key -> group id
  std::vector<int> picked(selectors.size(), 0);
  for (int i = 0; i < plan.nodes_size(); ++i) {
    proto::NodePlan &np = *plan.mutable_nodes(i);
    if (np.recompute_group() >= 0)
      continue;
    const ir::Node &node = graph.nodes()[static_cast<size_t>(np.node())];
    for (size_t k = 0; k < selectors.size(); ++k) {
      std::string key = keyOf(selectors[k], k, node);
      if (key.empty())
        continue;
      ++picked[k];
      auto [it, added] = groups.emplace(key, next);
      next += added ? 1 : 0;
      np.set_recompute_group(it->second);
      break;
    }
  }
  for (size_t k = 0; k < selectors.size(); ++k)
    if (picked[k] == 0)
      return selectorError(graph, selectors[k], fileText, "picks no node");
  return Status::ok();
}

std::string describeRecomputeGroup(const ir::Graph &graph, const proto::Plan &plan, int group) {
  std::vector<ir::ModuleFrame> common;
  std::vector<int64_t> ids;
  for (const proto::NodePlan &np : plan.nodes()) {
    if (np.recompute_group() != group)
      continue;
    std::vector<ir::ModuleFrame> frames = framesOf(graph.nodes()[static_cast<size_t>(np.node())]);
    if (ids.empty())
      common = frames;
    size_t n = 0;
    while (n < common.size() && n < frames.size() && common[n].path == frames[n].path)
      ++n;
    common.resize(n);
    ids.push_back(np.node());
  }
  if (!common.empty()) {
    const ir::ModuleFrame &f = common.back();
    return f.cls.empty() ? f.path : fmt::format("{} ({})", f.path, f.cls);
  }
  if (ids.empty())
    return "no nodes";
  return fmt::format("nodes {}..{}", ids.front(), ids.back());
}

} // namespace nnsc::plan
