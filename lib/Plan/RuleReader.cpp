// The shared reading of rule files (RuleReader.h).
#include "RuleReader.h"

#include <fmt/format.h>

namespace nnsc::plan {

namespace {

std::string joinKeys(const std::set<std::string> &keys) {
  std::string out;
  for (const std::string &k : keys)
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

} // namespace

Expected<YAML::Node> RuleReader::load() const {
  try {
    return YAML::Load(text_);
  } catch (const YAML::Exception &e) {
    SourcePos pos{path_, e.mark.line + 1, e.mark.column + 1};
    return Status::error(formatErrorWithSnippet(pos, e.msg, text_));
  }
}

Status RuleReader::errorAt(const YAML::Node &n, const std::string &msg) const {
  return Status::error(formatErrorWithSnippet(posOf(n), msg, text_));
}

Status RuleReader::errorAtStart(const std::string &msg) const {
  return Status::error(formatError({path_, 1, 1}, msg));
}

Status RuleReader::checkKeys(const YAML::Node &map, const std::set<std::string> &allowed,
                                 const char *what) const {
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = it->first.Scalar();
    if (!allowed.count(key))
      return errorAt(it->first, fmt::format("unknown key '{}' in {}; expected one of: {}", key,
                                            what, joinKeys(allowed)));
    if (!seen.insert(key).second)
      return errorAt(it->first, fmt::format("duplicate key '{}' in {}", key, what));
  }
  return Status::ok();
}

Expected<int64_t> RuleReader::readInt(const YAML::Node &n, const char *what,
                                          int64_t min) const {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    return errorAt(n, fmt::format("{} must be an integer", what));
  if (v < min)
    return errorAt(n, fmt::format("{} must be at least {}; got {}", what, min, v));
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
    auto v = readInt(nth, "nth", 0);
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
      auto id = readInt(item, "node", 0);
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
