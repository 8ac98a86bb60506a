// The shared reading of rule files (RuleReader.h).
#include "RuleReader.h"

#include <fmt/format.h>

namespace nnsc::plan {

Expected<int64_t> RuleReader::readInt(const YAML::Node &n, const char *what,
                                          int64_t min, int64_t max) const {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    return errorAt(n, fmt::format("{} must be an integer", what));
  if (v < min)
    return errorAt(n, fmt::format("{} must be at least {}; got {}", what, min, v));
  if (v > max) // before any narrowing to int: 4294967298 must not become 2
    return errorAt(n, fmt::format("{} must be at most {}; got {}", what, max, n.Scalar()));
  return v;
}

Status RuleReader::readSelectors(const YAML::Node &n, PlanRule &rule) const {
  if (n["module"])
    NNSC_RETURN_IF_ERROR(readStrings(n["module"], rule.modules, "module"));
  if (n["op"])
    NNSC_RETURN_IF_ERROR(readStrings(n["op"], rule.ops, "op"));
  if (n["class"])
    NNSC_RETURN_IF_ERROR(readStrings(n["class"], rule.classes, "class"));
  if (const YAML::Node nth = n["nth"]) {
    auto v = readInt(nth, "nth", 0, INT64_MAX); // past the graph: "matched no node"
    if (!v)
      return v.status();
    rule.nth = *v;
  }
  if (const YAML::Node nodes = n["node"]) {
    std::vector<YAML::Node> items;
    if (nodes.IsSequence())
      for (const YAML::Node &item : nodes)
        items.push_back(item);
    else
      items.push_back(nodes);
    for (const YAML::Node &item : items) {
      auto id = readInt(item, "node", 0, INT64_MAX); // past the graph: named later
      if (!id)
        return id.status();
      rule.nodes.push_back(*id);
    }
  }
  if (rule.modules.empty() && rule.ops.empty() && rule.nodes.empty() && rule.classes.empty())
    return errorAt(n, "the rule selects nothing; give 'module', 'op', 'node' or 'class'");
  return Status::ok();
}

Status RuleReader::readStrings(const YAML::Node &n, std::vector<std::string> &out,
                                   const char *what) const {
  if (n.IsScalar()) {
    out.push_back(n.Scalar());
    return Status::ok();
  }
  if (!n.IsSequence())
    return errorAt(n, fmt::format("'{}' must be a string or a list of strings", what));
  for (const YAML::Node &item : n) {
    if (!item.IsScalar())
      return errorAt(item, fmt::format("'{}' must be a string or a list of strings", what));
    out.push_back(item.Scalar());
  }
  return Status::ok();
}

} // namespace nnsc::plan
