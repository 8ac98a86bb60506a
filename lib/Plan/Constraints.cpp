// autodist's constraints files (Constraints.h, docs/autodist.md).
#include "nnsc/Plan/Constraints.h"

#include <fmt/format.h>

#include "RuleReader.h"
#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Support/File.h"

namespace nnsc::plan {

namespace {

class ConstraintsReader : RuleReader {
public:
  ConstraintsReader(std::string path, std::string text) : RuleReader(path, text) {
    out_.path = std::move(path);
    out_.text = std::move(text);
  }
  Expected<Constraints> read();

private:
  Status readRule(const YAML::Node &n);
  Status readAllow(const YAML::Node &n, ConstraintRule &rule) const;
  Status readPin(const YAML::Node &n, ConstraintRule &rule) const;

  Constraints out_;
};

Expected<Constraints> ConstraintsReader::read() {
  auto root = parse();
  if (!root)
    return root.status();
  if (!root->IsMap())
    return errorAtTop("expected a map with the key 'constraints'");
  NNSC_RETURN_IF_ERROR(checkKeys(*root, {"constraints"}, "the constraints file"));
  const YAML::Node list = (*root)["constraints"];
  if (!list)
    return errorAtTop("the constraints file has no 'constraints'");
  if (!list.IsSequence())
    return errorAt(list, "'constraints' must be a list of rules");
  for (const YAML::Node &r : list)
    NNSC_RETURN_IF_ERROR(readRule(r));
  return out_;
}

Status ConstraintsReader::readRule(const YAML::Node &n) {
  if (!n.IsMap())
    return errorAt(n, "a constraint must be a map with selectors (module, op, node, class, nth) "
                      "and 'allow', 'replicate' or 'pin'");
  NNSC_RETURN_IF_ERROR(checkKeys(
      n, {"module", "op", "node", "class", "nth", "allow", "replicate", "pin"}, "a constraint"));
  if (n.size() == 0) // no first key to point at (and nothing to constrain)
    return errorAt(n, "an empty constraint; give selectors (module, op, node, class, nth) and "
                      "'allow', 'replicate' or 'pin'");
  ConstraintRule rule;
  rule.select.pos = posOf(n.begin()->first);
  NNSC_RETURN_IF_ERROR(readSelectors(n, rule.select));
  if (!n["allow"] && !n["replicate"] && !n["pin"])
    return errorAt(n, "the constraint constrains nothing; give 'allow', 'replicate' or 'pin'");
  if (n["pin"] && (n["allow"] || n["replicate"]))
    return errorAt(n["pin"], "'pin' fixes the option; it takes no 'allow' or 'replicate'");
  if (const YAML::Node a = n["allow"])
    NNSC_RETURN_IF_ERROR(readAllow(a, rule));
  if (const YAML::Node r = n["replicate"]) {
    if (!r.IsScalar() || !YAML::convert<bool>::decode(r, rule.replicate))
      return errorAt(r, fmt::format("'replicate' must be true or false; got '{}'",
                                    r.IsScalar() ? r.Scalar() : "a collection"));
  }
  if (const YAML::Node p = n["pin"])
    NNSC_RETURN_IF_ERROR(readPin(p, rule));
  out_.rules.push_back(std::move(rule));
  return Status::ok();
}

Status ConstraintsReader::readAllow(const YAML::Node &n, ConstraintRule &rule) const {
  std::vector<std::string> idents;
  if (!(n.IsSequence() && n.size() == 0))
    NNSC_RETURN_IF_ERROR(readStrings(n, idents, "allow"));
  for (const std::string &id : idents)
    if (id.empty())
      return errorAt(n, "'allow' lists identifiers of the op's annotation; got an empty one");
  rule.allow = std::set<std::string>(idents.begin(), idents.end());
  return Status::ok();
}

Status ConstraintsReader::readPin(const YAML::Node &n, ConstraintRule &rule) const {
  rule.pinned = true;
  if (n.IsScalar() && n.Scalar() == "replicate") {
    rule.replicate = true;
    rule.allow = std::set<std::string>();
    return Status::ok();
  }
  if (!n.IsMap())
    return errorAt(n, fmt::format("unknown pin '{}'; expected 'replicate' or a map {{ident, "
                                  "interleave}}",
                                  n.IsScalar() ? n.Scalar() : "a list"));
  NNSC_RETURN_IF_ERROR(checkKeys(n, {"ident", "interleave"}, "a pin"));
  const YAML::Node id = n["ident"];
  if (!id || !id.IsScalar() || id.Scalar().empty())
    return errorAt(n, "a pinned split needs 'ident': an identifier of the op's annotation");
  rule.pinIdent = id.Scalar();
  rule.replicate = false;
  rule.allow = std::set<std::string>{rule.pinIdent};
  if (const YAML::Node blocks = n["interleave"]) {
    auto v = readInt(blocks, "interleave", 1);
    if (!v)
      return v.status();
    rule.pinInterleave = static_cast<int>(*v);
  }
  return Status::ok();
}

std::string joined(const std::vector<std::string> &items) {
  std::string out;
  for (const std::string &s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// Applies rule `index` to what node `nc` is left.
void narrow(NodeConstraint &nc, const ConstraintRule &rule, int index) {
  nc.rules.push_back(index);
  nc.replicate = nc.replicate && rule.replicate;
  if (rule.allow) {
    if (!nc.allow) {
      nc.allow = rule.allow;
    } else {
      std::set<std::string> both;
      for (const std::string &id : *nc.allow)
        if (rule.allow->count(id))
          both.insert(id);
      nc.allow = both;
    }
  }
  if (rule.pinned && !rule.pinIdent.empty())
    nc.interleave = rule.pinInterleave;
}

} // namespace

std::string ConstraintRule::where() const {
  return fmt::format("{}:{}:{} ({})", select.pos.file, select.pos.line, select.pos.col,
                     select.selectorText());
}

Expected<Constraints> parseConstraints(const std::string &text, const std::string &path) {
  return ConstraintsReader(path, text).read();
}

Expected<Constraints> readConstraints(const std::string &path) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parseConstraints(*text, path);
}

Expected<std::vector<NodeConstraint>> constrainNodes(const ir::Graph &graph,
                                                     const Constraints &constraints) {
  std::vector<NodeConstraint> out(graph.nodes().size());
  std::vector<int64_t> nth = opIndexInModule(graph);
  std::vector<int> matched(constraints.rules.size());
  for (size_t k = 0; k < graph.nodes().size(); ++k) {
    const ir::Node &node = graph.nodes()[k];
    for (size_t r = 0; r < constraints.rules.size(); ++r) {
      const ConstraintRule &rule = constraints.rules[r];
      if (!rule.select.matches(node, nth[k]))
        continue;
      ++matched[r];
      narrow(out[k], rule, static_cast<int>(r));
      if (!rule.pinned || rule.pinIdent.empty())
        continue;
      auto bound = bindNode(graph, node);
      std::vector<std::string> ids = bound ? ops::splittableIdents(*bound) : std::vector<std::string>{};
      if (std::find(ids.begin(), ids.end(), rule.pinIdent) == ids.end())
        return Status::error(formatErrorWithSnippet(
            rule.select.pos,
            fmt::format("constraint '{}' pins {} to a split along '{}'; its annotation splits "
                        "along: {}",
                        rule.select.selectorText(), describeNode(node), rule.pinIdent, joined(ids)),
            constraints.text));
    }
  }
  for (size_t r = 0; r < constraints.rules.size(); ++r)
    if (matched[r] == 0)
      return Status::error(formatErrorWithSnippet(
          constraints.rules[r].select.pos,
          fmt::format("constraint matched no node: {}", constraints.rules[r].select.selectorText()),
          constraints.text));
  return out;
}

std::string constraintViolation(const ir::Graph &graph, const proto::Plan &plan,
                                const Constraints &constraints,
                                const std::vector<NodeConstraint> &nodes) {
  for (int k = 0; k < plan.nodes_size() && k < static_cast<int>(nodes.size()); ++k) {
    const NodeConstraint &nc = nodes[static_cast<size_t>(k)];
    const proto::NodePlan &np = plan.nodes(k);
    std::string ident = np.num() > 1 ? np.ident() : "";
    bool blocksOk = ident.empty() || nc.interleave == 0 ||
                    std::max(1, np.interleave()) == nc.interleave;
    if (!nc.constrained() || (nc.allows(ident) && blocksOk))
      continue;
    const ConstraintRule &rule =
        constraints.rules[static_cast<size_t>(nc.rules.back())];
    return fmt::format("{} {} breaks {}", describeNode(graph.nodes()[static_cast<size_t>(k)]),
                       ident.empty() ? std::string("whole") : "split along '" + ident + "'",
                       rule.where());
  }
  return "";
}

} // namespace nnsc::plan
