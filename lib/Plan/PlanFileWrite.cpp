// Writing a plan back as a plan file (PlanFile.h writePlanFile): rules keyed
// on module paths and op places, not node ids, so the file survives a
// re-trace and reads as the model's structure.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PlanFile.h"

namespace nnsc::plan {

namespace {

// Plain YAML where that is safe, else single-quoted.
std::string yamlScalar(const std::string &s) {
  bool plain = !s.empty() && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
  for (char c : s)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                      c == ':');
  if (plain)
    return s;
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool isNumber(const std::string &s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "layers.3.self_attn" -> "layers.*.self_attn": the path of every instance
// of a repeated module.
std::string generalise(const std::string &path) {
  std::string out, part;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '.') {
      part += path[i];
      continue;
    }
    out += (i > part.size() ? "." : "") + (isNumber(part) ? std::string("*") : part);
    part.clear();
  }
  return out;
}

bool isSplit(const proto::NodePlan &np) { return !np.ident().empty() && np.num() > 1; }

// The partition a rule writes for `np` over `planNgpus` devices.
std::string partitionText(const proto::NodePlan &np, int planNgpus) {
  if (!isSplit(np))
    return "replicate";
  std::string out = "{ident: " + yamlScalar(np.ident());
  if (np.num() != planNgpus)
    out += fmt::format(", num: {}", np.num());
  if (np.interleave() > 1)
    out += fmt::format(", interleave: {}", np.interleave());
  return out + "}";
}

struct RuleKey {
  std::string module;
  std::string op;
  int64_t nth = -1;
  bool operator<(const RuleKey &o) const {
    return std::tie(module, op, nth) < std::tie(o.module, o.op, o.nth);
  }
};

std::string ruleText(const RuleKey &key, const std::string &partition) {
  std::string out = "  - {module: " + yamlScalar(key.module) + ", op: " + yamlScalar(key.op);
  if (key.nth >= 0)
    out += fmt::format(", nth: {}", key.nth);
  return out + ", partition: " + partition + "}\n";
}

// The rules: one per (module pattern, op, nth) where every instance agrees,
// else one per instance; replicated nodes need none (the default).
std::string rulesText(const ir::Graph &graph, const proto::Plan &plan, bool generaliseLayers) {
  std::vector<int64_t> nth = opIndexInModule(graph);
  std::map<std::pair<std::string, std::string>, int64_t> count; // (path, op) -> nodes
  for (const ir::Node &node : graph.nodes())
    ++count[{node.modulePath, node.op}];
  std::map<RuleKey, std::vector<size_t>> groups;
  std::vector<RuleKey> order;
  for (size_t k = 0; k < graph.nodes().size(); ++k) {
    const ir::Node &node = graph.nodes()[k];
    RuleKey key{generaliseLayers ? generalise(node.modulePath) : node.modulePath, node.op,
                count[{node.modulePath, node.op}] > 1 ? nth[k] : -1};
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh)
      order.push_back(key);
    it->second.push_back(k);
  }
  std::string out;
  for (const RuleKey &key : order) {
    const std::vector<size_t> &members = groups[key];
    std::set<std::string> parts;
    bool anySplit = false;
    for (size_t k : members) {
      parts.insert(partitionText(plan.nodes(static_cast<int>(k)), plan.plan_ngpus()));
      anySplit = anySplit || isSplit(plan.nodes(static_cast<int>(k)));
    }
    if (!anySplit)
      continue;
    if (parts.size() == 1) {
      out += ruleText(key, *parts.begin());
      continue;
    }
    for (size_t k : members) { // the instances disagree: a rule each
      const proto::NodePlan &np = plan.nodes(static_cast<int>(k));
      if (isSplit(np))
        out += ruleText({graph.nodes()[k].modulePath, key.op, key.nth},
                        partitionText(np, plan.plan_ngpus()));
    }
  }
  return out;
}

std::string inputsText(const ir::Graph &graph, const proto::Plan &plan) {
  std::string out;
  for (const proto::InputPlan &in : plan.inputs()) {
    if (in.num() <= 1)
      continue;
    out += "  - {name: " + yamlScalar(graph.tensor(in.tensor()).name) +
           fmt::format(", dim: {}", in.dim());
    out += in.num() != plan.plan_ngpus() ? fmt::format(", num: {}}}\n", in.num()) : "}\n";
  }
  return out.empty() ? "" : "inputs:\n" + out;
}

// A recompute group as a module path: the innermost module enclosing all
// its nodes when that module holds exactly them; else "" (node ids).
std::string recomputeModule(const ir::Graph &graph, const std::vector<size_t> &members) {
  std::vector<ir::ModuleFrame> common = graph.nodes()[members[0]].moduleStack;
  for (size_t k : members) {
    const auto &stack = graph.nodes()[k].moduleStack;
    size_t n = 0;
    while (n < common.size() && n < stack.size() && common[n].path == stack[n].path)
      ++n;
    common.resize(n);
  }
  if (common.empty() || common.back().path.find_first_of("*?") != std::string::npos)
    return "";
  const std::string &path = common.back().path;
  size_t inside = 0;
  for (const ir::Node &node : graph.nodes())
    inside += std::any_of(node.moduleStack.begin(), node.moduleStack.end(),
                          [&](const ir::ModuleFrame &f) { return f.path == path; });
  return inside == members.size() ? path : "";
}

// Every module path of the graph, by its generalised form.
std::map<std::string, std::set<std::string>> instancesByPattern(const ir::Graph &graph) {
  std::map<std::string, std::set<std::string>> out;
  for (const ir::Node &node : graph.nodes())
    for (const ir::ModuleFrame &f : node.moduleStack)
      out[generalise(f.path)].insert(f.path);
  return out;
}

std::string recomputeText(const ir::Graph &graph, const proto::Plan &plan) {
  std::map<int, std::vector<size_t>> groups;
  for (int k = 0; k < plan.nodes_size(); ++k)
    if (plan.nodes(k).recompute_group() >= 0)
      groups[plan.nodes(k).recompute_group()].push_back(static_cast<size_t>(k));
  std::map<std::string, std::set<std::string>> chosen; // pattern -> recomputed instances
  std::vector<std::string> entries;
  for (const auto &[group, members] : groups) {
    std::string path = recomputeModule(graph, members);
    if (!path.empty()) {
      if (chosen[generalise(path)].empty())
        entries.push_back(generalise(path));
      chosen[generalise(path)].insert(path);
      continue;
    }
    std::string ids;
    for (size_t k : members)
      ids += (ids.empty() ? "" : ", ") + std::to_string(graph.nodes()[k].id);
    entries.push_back("{node: [" + ids + "]}");
  }
  // Every instance of a layer recomputed: the layer glob; else the instances.
  auto all = instancesByPattern(graph);
  std::string out;
  for (const std::string &e : entries) {
    auto it = chosen.find(e);
    if (it == chosen.end())
      out += "  - " + e + "\n";
    else if (it->second == all[e])
      out += "  - " + yamlScalar(e) + "\n";
    else
      for (const std::string &path : it->second)
        out += "  - " + yamlScalar(path) + "\n";
  }
  return out.empty() ? "" : "recompute:\n" + out;
}

Status checkExpressible(const ir::Graph &graph, const proto::Plan &plan) {
  if (plan.nodes_size() != static_cast<int>(graph.nodes().size()))
    return errorf("error: the plan has {} nodes; the graph {}", plan.nodes_size(),
                  graph.nodes().size());
  std::vector<int> all = firstDevices(plan.plan_ngpus());
  for (const proto::NodePlan &np : plan.nodes()) {
    std::vector<int> devices(np.devices().begin(), np.devices().end());
    if (np.stage() != 0 || devices != all)
      return errorf("error: node {} runs on other devices than all {} plan devices of one stage; "
                    "a plan file cannot say that",
                    np.node(), plan.plan_ngpus());
  }
  return Status::ok();
}

// A pipelined plan's stages, schedule and micro-batches; "" for others.
struct PipelineText {
  int planNgpus = 0; ///< all stages' devices
  std::string text;
};

std::string fileText(const ir::Graph &graph, const proto::Plan &plan,
                     const std::vector<std::string> &header, bool generaliseLayers,
                     const PipelineText &pipeline = {}) {
  std::string out;
  for (const std::string &line : header)
    out += "# " + line + "\n";
  out += fmt::format("plan_ngpus: {}\nzero: {}\n",
                     pipeline.text.empty() ? plan.plan_ngpus() : pipeline.planNgpus, plan.zero());
  if (plan.zero_ngroups() > 1)
    out += fmt::format("zero_ngroups: {}\n", plan.zero_ngroups());
  out += "default: replicate\n";
  if (plan.micro_batches() > 1)
    out += fmt::format("micro_batches: {}\n", plan.micro_batches());
  out += pipeline.text;
  out += inputsText(graph, plan);
  out += recomputeText(graph, plan);
  std::string rules = rulesText(graph, plan, generaliseLayers);
  return out + (rules.empty() ? "rules: []\n" : "rules:\n" + rules);
}

// "" when the text gives `plan` again, else the difference.
std::string roundTrip(const ir::Graph &graph, const proto::Plan &plan, const std::string &text) {
  auto file = parsePlanFile(text, "written plan file");
  if (!file)
    return file.status().message();
  auto again = file->stages.empty()
                   ? applyPlanFile(graph, *file, plan.plan_ngpus(), plan.runtime_ngpus())
                   : applyStagedPlanFile(graph, *file, plan.plan_ngpus(), plan.runtime_ngpus());
  if (!again)
    return again.status().message();
  again->set_zero(file->zero);
  again->set_zero_ngroups(std::max(0, file->zeroNgroups));
  if (std::string d = planDifference(plan, *again); !d.empty())
    return d;
  if (plan.stages_size() > 1 &&
      (plan.schedule() != again->schedule() || plan.stages_size() != again->stages_size()))
    return fmt::format("schedule {} over {} stages vs {} over {}", plan.schedule(),
                       plan.stages_size(), again->schedule(), again->stages_size());
  return "";
}

// The modules that hold exactly each virtual stage's nodes: per node, its
// outermost enclosing module whose nodes all lie in the node's stage. Nodes
// outside every module (top-level ops) are left to follow the node before.
Expected<std::vector<std::vector<std::string>>> stageModules(const ir::Graph &graph,
                                                            const proto::Plan &plan) {
  std::map<std::string, std::set<int>> stagesOf; // module path -> stages of its nodes
  for (const ir::Node &node : graph.nodes())
    for (const std::string &path : enclosingModules(node.modulePath))
      stagesOf[path].insert(plan.nodes(static_cast<int>(node.id)).stage());
  std::vector<std::vector<std::string>> out(static_cast<size_t>(plan.stages_size()));
  std::set<std::string> taken;
  for (const ir::Node &node : graph.nodes()) {
    int stage = plan.nodes(static_cast<int>(node.id)).stage();
    std::vector<std::string> paths = enclosingModules(node.modulePath);
    if (paths.empty())
      continue;
    auto own = std::find_if(paths.begin(), paths.end(),
                            [&](const std::string &p) { return stagesOf[p].size() == 1; });
    if (own == paths.end())
      return errorf("error: node {} ({} at {}) is in stage {}, but module {} also holds nodes of "
                    "other stages; a plan file's stages are whole modules",
                    node.id, node.op, node.modulePath, stage, node.modulePath);
    if (taken.insert(*own).second)
      out[static_cast<size_t>(stage)].push_back(*own);
  }
  return out;
}

// A pipelined plan seen from one stage: every node on the devices of its
// stage's position (0 .. T-1), stage and schedule cleared; the rules are
// written from it.
Expected<proto::Plan> oneStage(const proto::Plan &plan, int S) {
  const int T = plan.plan_ngpus() / S;
  for (const proto::Stage &stage : plan.stages()) {
    int base = (stage.id() % S) * T;
    std::vector<int> want;
    for (int d = 0; d < T; ++d)
      want.push_back(base + d);
    if (!std::equal(stage.devices().begin(), stage.devices().end(), want.begin(), want.end()))
      return errorf("error: stage {} runs on other devices than {}..{}; a plan file's stages "
                    "cannot say that",
                    stage.id(), base, base + T - 1);
  }
  proto::Plan local = plan;
  local.clear_stages();
  local.clear_schedule();
  local.set_plan_ngpus(T);
  local.set_runtime_ngpus(plan.runtime_ngpus() / S);
  for (proto::NodePlan &np : *local.mutable_nodes()) {
    for (int &d : *np.mutable_devices())
      d -= (np.stage() % S) * T;
    np.set_stage(0);
  }
  return local;
}

Expected<PipelineText> pipelineText(const ir::Graph &graph, const proto::Plan &plan, int S) {
  auto modules = stageModules(graph, plan);
  if (!modules)
    return modules.status();
  PipelineText out;
  out.planNgpus = plan.plan_ngpus();
  int V = plan.stages_size() / S;
  out.text = "schedule: " + plan.schedule() + "\n";
  if (V > 1)
    out.text += fmt::format("virtual_stages: {}\n", V);
  out.text += "stages:\n";
  for (size_t k = 0; k < modules->size(); ++k) {
    std::string list;
    for (const std::string &path : (*modules)[k])
      list += (list.empty() ? "" : ", ") + yamlScalar(path);
    out.text += fmt::format("  - [{}]{}\n", list,
                            V > 1 ? fmt::format("   # physical stage {}", k % size_t(S)) : "");
  }
  return out;
}

std::string nodeDifference(const proto::NodePlan &a, const proto::NodePlan &b) {
  auto blocks = [](const proto::NodePlan &n) { return std::max(1, n.interleave()); };
  if (a.node() != b.node())
    return fmt::format("node {} vs {}", a.node(), b.node());
  if (isSplit(a) != isSplit(b) || (isSplit(a) && (a.ident() != b.ident() || a.num() != b.num() ||
                                                  a.input() != b.input() || a.dim() != b.dim() ||
                                                  blocks(a) != blocks(b))))
    return fmt::format("node {}: split '{}'/{} (interleave {}) vs '{}'/{} (interleave {})",
                       a.node(), a.ident(), a.num(), blocks(a), b.ident(), b.num(), blocks(b));
  if (!std::equal(a.devices().begin(), a.devices().end(), b.devices().begin(), b.devices().end()))
    return fmt::format("node {}: other devices", a.node());
  if (a.stage() != b.stage())
    return fmt::format("node {}: stage {} vs {}", a.node(), a.stage(), b.stage());
  if (a.recompute_group() != b.recompute_group())
    return fmt::format("node {}: recompute group {} vs {}", a.node(), a.recompute_group(),
                       b.recompute_group());
  return "";
}

} // namespace

std::string planDifference(const proto::Plan &a, const proto::Plan &b) {
  if (a.plan_ngpus() != b.plan_ngpus() || a.zero() != b.zero() ||
      std::max(1, a.zero_ngroups()) != std::max(1, b.zero_ngroups()))
    return fmt::format("plan_ngpus {} zero {} zero_ngroups {} vs plan_ngpus {} zero {} "
                       "zero_ngroups {}",
                       a.plan_ngpus(), a.zero(), std::max(1, a.zero_ngroups()), b.plan_ngpus(),
                       b.zero(), std::max(1, b.zero_ngroups()));
  auto inputs = [](const proto::Plan &p) {
    std::vector<std::tuple<int64_t, int, int>> out;
    for (const proto::InputPlan &in : p.inputs())
      if (in.num() > 1)
        out.emplace_back(in.tensor(), in.dim(), in.num());
    return out;
  };
  if (inputs(a) != inputs(b))
    return "the input splits differ";
  if (a.nodes_size() != b.nodes_size())
    return fmt::format("{} vs {} nodes", a.nodes_size(), b.nodes_size());
  for (int k = 0; k < a.nodes_size(); ++k)
    if (std::string d = nodeDifference(a.nodes(k), b.nodes(k)); !d.empty())
      return d;
  return "";
}

Expected<std::string> writePlanFile(const ir::Graph &graph, const proto::Plan &plan,
                                    const std::vector<std::string> &header) {
  PipelineText pipeline;
  proto::Plan rules = plan; // what the rules say: one stage's splits
  if (plan.stages_size() > 1) {
    int S = physicalStages(plan);
    auto local = oneStage(plan, S);
    if (!local)
      return local.status();
    auto text = pipelineText(graph, plan, S);
    if (!text)
      return text.status();
    rules = local.take();
    pipeline = text.take();
  }
  NNSC_RETURN_IF_ERROR(checkExpressible(graph, rules));
  std::string text = fileText(graph, rules, header, true, pipeline);
  if (roundTrip(graph, plan, text).empty())
    return text;
  // A layer glob matched more than it should: name every instance.
  text = fileText(graph, rules, header, false, pipeline);
  std::string diff = roundTrip(graph, plan, text);
  if (!diff.empty())
    return errorf("internal error: the written plan file does not reproduce the plan: {}", diff);
  return text;
}

} // namespace nnsc::plan
