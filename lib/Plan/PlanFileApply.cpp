// Applying a user plan file to a graph (PlanFile.h): the file policy.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "Policies.h"
#include "SplitTracker.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PlanFile.h"

namespace nnsc::plan {

bool globMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, starP = std::string_view::npos, starT = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      starP = p++;
      starT = t;
    } else if (starP != std::string_view::npos) {
      p = starP + 1;
      t = ++starT;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

std::vector<std::string> enclosingModules(const std::string &modulePath) {
  std::vector<std::string> out;
  for (size_t dot = 0; !modulePath.empty(); ++dot) {
    dot = modulePath.find('.', dot);
    out.push_back(modulePath.substr(0, dot));
    if (dot == std::string::npos)
      break;
  }
  return out;
}

namespace {

bool anyGlob(const std::vector<std::string> &globs, const std::string &text) {
  for (const std::string &g : globs)
    if (globMatch(g, text))
      return true;
  return false;
}

std::string listText(const std::vector<std::string> &items) {
  std::string out;
  for (const std::string &s : items)
    out += (out.empty() ? "" : "|") + s;
  return out;
}

} // namespace

std::string PlanRule::selectorText() const {
  std::vector<std::string> parts;
  if (!modules.empty())
    parts.push_back("module " + listText(modules));
  if (!ops.empty())
    parts.push_back("op " + listText(ops));
  if (!nodes.empty()) {
    std::vector<std::string> ids;
    for (int64_t n : nodes)
      ids.push_back(std::to_string(n));
    parts.push_back("node " + listText(ids));
  }
  if (!classes.empty())
    parts.push_back("class " + listText(classes));
  if (nth >= 0)
    parts.push_back("nth " + std::to_string(nth));
  std::string out;
  for (const std::string &p : parts)
    out += (out.empty() ? "" : ", ") + p;
  return out;
}

bool PlanRule::matches(const ir::Node &node, int64_t nthOfNode) const {
  if (!modules.empty() && !anyGlob(modules, node.modulePath))
    return false;
  if (nth >= 0 && nth != nthOfNode)
    return false;
  if (!classes.empty() &&
      std::none_of(node.moduleStack.begin(), node.moduleStack.end(),
                   [&](const ir::ModuleFrame &f) { return anyGlob(classes, f.cls); }))
    return false;
  if (!ops.empty() && !anyGlob(ops, node.op))
    return false;
  if (!nodes.empty() && std::find(nodes.begin(), nodes.end(), node.id) == nodes.end())
    return false;
  return true;
}

std::vector<int64_t> opIndexInModule(const ir::Graph &graph) {
  std::map<std::pair<std::string, std::string>, int64_t> seen;
  std::vector<int64_t> out;
  out.reserve(graph.nodes().size());
  for (const ir::Node &node : graph.nodes())
    out.push_back(seen[{node.modulePath, node.op}]++);
  return out;
}

namespace {

class PlanFileApplier {
public:
  PlanFileApplier(const ir::Graph &graph, const PlanFile &file, int planNgpus, int runtimeNgpus)
      : graph_(graph), file_(file), plan_(newPlan("file", planNgpus, runtimeNgpus)),
        tracker_(graph), devices_(firstDevices(planNgpus)), matched_(file.rules.size()),
        nth_(opIndexInModule(graph)) {}

  Expected<proto::Plan> run();

private:
  Status errorAt(const PlanRule &rule, const std::string &msg) const {
    return Status::error(formatErrorWithSnippet(rule.pos, msg, file_.text));
  }
  std::string tagOf(const PlanRule &rule) const {
    return fmt::format("{}:{}", std::filesystem::path(file_.path).filename().string(),
                       rule.pos.line);
  }
  Status splitInputs();
  Expected<proto::NodePlan> planNode(const ir::Node &node, int64_t nth);
  Expected<proto::NodePlan> partition(const ir::Node &node, const PlanRule &rule);
  proto::NodePlan follow(const ir::Node &node, const std::string &tag) {
    auto np = followInputs(graph_, node, tracker_, devices_, tag);
    return np ? *np : replicateNode(node, devices_, tag);
  }

  const ir::Graph &graph_;
  const PlanFile &file_;
  proto::Plan plan_;
  SplitTracker tracker_;
  std::vector<int> devices_;
  std::vector<int> matched_;
  std::vector<int64_t> nth_;
};

Status PlanFileApplier::splitInputs() {
  for (const InputRule &in : file_.inputs) {
    auto it = std::find_if(graph_.inputs.begin(), graph_.inputs.end(),
                           [&](int64_t id) { return graph_.tensor(id).name == in.name; });
    if (it == graph_.inputs.end()) {
      std::string names;
      for (int64_t id : graph_.inputs)
        names += (names.empty() ? "" : ", ") + graph_.tensor(id).name;
      return Status::error(formatErrorWithSnippet(
          in.pos, fmt::format("no graph input named '{}'; the inputs are: {}", in.name, names),
          file_.text));
    }
    for (const InputRule &earlier : file_.inputs) {
      if (&earlier == &in)
        break;
      if (earlier.name == in.name)
        return Status::error(
            formatErrorWithSnippet(in.pos,
                                   fmt::format("input '{}' is split twice: here and at line {}",
                                               in.name, earlier.pos.line),
                                   file_.text));
    }
    const ir::Tensor &t = graph_.tensor(*it);
    int num = in.num > 0 ? in.num : static_cast<int>(devices_.size());
    if (in.dim >= static_cast<int>(t.shape.size()) ||
        t.shape[static_cast<size_t>(in.dim)] % num != 0)
      return Status::error(formatErrorWithSnippet(
          in.pos,
          fmt::format("input '{}' {} has no dim {} that splits into {} parts", in.name,
                      ir::shapeString(t.shape), in.dim, num),
          file_.text));
    proto::InputPlan *p = plan_.add_inputs();
    p->set_tensor(*it);
    p->set_dim(in.dim);
    p->set_num(num);
    tracker_.setInput(*it, in.dim, num);
  }
  return Status::ok();
}

Expected<proto::Plan> PlanFileApplier::run() {
  NNSC_RETURN_IF_ERROR(splitInputs());
  for (const ir::Node &node : graph_.nodes()) {
    auto np = planNode(node, nth_[static_cast<size_t>(&node - graph_.nodes().data())]);
    if (!np)
      return np.status();
    NNSC_RETURN_IF_ERROR(addNodePlan(graph_, node, np.take(), plan_, tracker_));
  }
  for (size_t i = 0; i < file_.rules.size(); ++i)
    if (matched_[i] == 0)
      return errorAt(file_.rules[i],
                     fmt::format("rule matched no node: {}", file_.rules[i].selectorText()));
  NNSC_RETURN_IF_ERROR(assignRecomputeGroups(graph_, file_.recompute, plan_, file_.text));
  return plan_;
}

Expected<proto::NodePlan> PlanFileApplier::planNode(const ir::Node &node, int64_t nth) {
  for (size_t i = 0; i < file_.rules.size(); ++i) {
    const PlanRule &rule = file_.rules[i];
    if (!rule.matches(node, nth))
      continue;
    ++matched_[i];
    if (rule.action == RuleAction::Partition)
      return partition(node, rule);
    if (rule.action == RuleAction::Follow)
      return follow(node, tagOf(rule));
    return replicateNode(node, devices_, tagOf(rule));
  }
  if (file_.defaultAction == RuleAction::Follow)
    return follow(node, "default follow");
  return replicateNode(node, devices_, "default replicate");
}

Expected<proto::NodePlan> PlanFileApplier::partition(const ir::Node &node, const PlanRule &rule) {
  int n = static_cast<int>(devices_.size());
  int num = rule.num > 0 ? rule.num : n;
  if (num == 1)
    return replicateNode(node, devices_, tagOf(rule));
  if (num != n)
    return errorAt(rule, fmt::format("rule '{}' splits {} into {} parts; a node is split over "
                                     "all plan_ngpus ({}) devices or replicated",
                                     rule.selectorText(), describeNode(node), num, n));
  auto np = rule.ident.empty() ? splitNodeByDim(graph_, node, rule.input, rule.dim, devices_,
                                                tagOf(rule), rule.interleave)
                               : splitNodeByIdent(graph_, node, rule.ident, devices_, tagOf(rule),
                                                  rule.interleave);
  if (!np)
    return errorAt(rule, fmt::format("rule '{}': {}", rule.selectorText(), np.status().message()));
  return np;
}

} // namespace

Expected<proto::Plan> applyPlanFile(const ir::Graph &graph, const PlanFile &file, int planNgpus,
                                    int runtimeNgpus) {
  return PlanFileApplier(graph, file, planNgpus, runtimeNgpus).run();
}

namespace {

// The stages whose globs match the node's module or an enclosing one.
std::vector<int> stagesClaiming(const ir::Node &node, const PlanFile &file) {
  std::vector<int> out;
  std::vector<std::string> paths = enclosingModules(node.modulePath);
  for (size_t k = 0; k < file.stages.size(); ++k)
    if (std::any_of(paths.begin(), paths.end(),
                    [&](const std::string &p) { return anyGlob(file.stages[k].modules, p); }))
      out.push_back(static_cast<int>(k));
  return out;
}

Status stageError(const PlanFile &file, int stage, const std::string &msg) {
  return Status::error(
      formatErrorWithSnippet(file.stages[static_cast<size_t>(stage)].pos, msg, file.text));
}

std::string globsText(const StageRule &stage) { return listText(stage.modules); }

} // namespace

Expected<std::vector<int64_t>> planFileStageCuts(const ir::Graph &graph, const PlanFile &file) {
  const int count = static_cast<int>(file.stages.size());
  std::vector<int64_t> first(static_cast<size_t>(count), -1);
  int current = 0;
  const ir::Node *previous = nullptr; // the last node a stage claimed
  for (const ir::Node &node : graph.nodes()) {
    std::vector<int> claims = stagesClaiming(node, file);
    if (claims.size() > 1)
      return stageError(file, claims[1],
                        fmt::format("stage {} ({}) and stage {} ({}) both hold {}", claims[0],
                                    globsText(file.stages[size_t(claims[0])]), claims[1],
                                    globsText(file.stages[size_t(claims[1])]),
                                    describeNode(node)));
    if (claims.empty())
      continue; // a top-level op: the stage of the node before it
    int k = claims[0];
    if (k < current)
      return stageError(file, k,
                        fmt::format("stage {} holds {}, which comes after {} of the later stage "
                                    "{}; stages must follow the graph's order",
                                    k, describeNode(node), describeNode(*previous), current));
    if (first[static_cast<size_t>(k)] < 0)
      first[static_cast<size_t>(k)] = node.id;
    current = k;
    previous = &node;
  }
  for (int k = 0; k < count; ++k)
    if (first[static_cast<size_t>(k)] < 0)
      return stageError(file, k,
                        fmt::format("stage {} ({}) holds no node: no module path matches", k,
                                    globsText(file.stages[static_cast<size_t>(k)])));
  first[0] = 0; // top-level ops before the first module belong to the first stage
  return first;
}

Expected<proto::Plan> applyStagedPlanFile(const ir::Graph &graph, const PlanFile &file,
                                          int planNgpus, int runtimeNgpus) {
  const int V = std::max(1, file.virtualStages);
  const int S = static_cast<int>(file.stages.size()) / V;
  auto at = [&](const std::string &msg) {
    return Status::error(formatErrorWithSnippet(file.stagesPos, msg, file.text));
  };
  if (planNgpus % S != 0)
    return at(fmt::format("{} devices per model copy do not split over the {} pipeline stages",
                          planNgpus, S));
  if (runtimeNgpus % planNgpus != 0)
    return at(fmt::format("--runtime-ngpus {} is not a multiple of the {} devices per model copy",
                          runtimeNgpus, planNgpus));
  auto cuts = planFileStageCuts(graph, file);
  if (!cuts)
    return cuts.status();
  auto plan = applyPlanFile(graph, file, planNgpus / S, runtimeNgpus / S);
  if (!plan)
    return plan.status();
  PipelineOptions options;
  options.stages = S;
  options.virtualStages = V;
  options.schedule = !file.schedule.empty() ? file.schedule : (V > 1 ? "interleaved" : "1f1b");
  applyPipelineCuts(options, *cuts, *plan);
  return plan;
}

namespace {

// A plan file with `stages:`: the file says how many stages, their schedule
// and micro-batches; the command line may repeat them but not contradict.
Expected<proto::Plan> makeFromStagedFile(const ir::Graph &graph, const PlanOptions &options,
                                         const PlanFile &file) {
  const int V = std::max(1, file.virtualStages);
  const int S = static_cast<int>(file.stages.size()) / V;
  const PipelineOptions &cli = options.pipeline;
  if (cli.stages > 1 && cli.stages != S)
    return errorf("error: --pipeline-stages {} disagrees with the {} stages of {}", cli.stages,
                  S, options.planFile);
  if (cli.virtualStages > 1 && cli.virtualStages != V)
    return errorf("error: --virtual-stages {} disagrees with virtual_stages {} in {}",
                  cli.virtualStages, V, options.planFile);
  std::string schedule = !file.schedule.empty() ? file.schedule : (V > 1 ? "interleaved" : "1f1b");
  if (cli.schedule != "1f1b" && cli.schedule != schedule)
    return errorf("error: --schedule {} disagrees with schedule {} of {}", cli.schedule, schedule,
                  options.planFile);
  int n = options.planNgpus > 0 ? options.planNgpus
                                : (file.planNgpus > 0 ? file.planNgpus : options.runtimeNgpus);
  int micro = file.microBatches > 0 ? file.microBatches : options.microBatches;
  if (file.microBatches > 0 && options.microBatches != 1 && options.microBatches != micro)
    return errorf("error: --micro-batches {} disagrees with micro_batches {} in {}",
                  options.microBatches, micro, options.planFile);
  if (schedule == "interleaved" && micro % S != 0)
    return errorf("error: the interleaved schedule needs micro-batches divisible by the {} "
                  "pipeline stages of {} (got {})",
                  S, options.planFile, micro);
  auto plan = applyStagedPlanFile(graph, file, n, options.runtimeNgpus);
  if (!plan)
    return plan.status();
  plan->set_micro_batches(micro);
  return plan;
}

} // namespace

Expected<proto::Plan> makeFromPlanFile(const ir::Graph &graph, const PlanOptions &options) {
  auto file = readPlanFile(options.planFile);
  if (!file)
    return file.status();
  if (options.planNgpus > 0 && file->planNgpus > 0 && options.planNgpus != file->planNgpus)
    return errorf("error: --plan-ngpus {} disagrees with plan_ngpus {} in {}", options.planNgpus,
                  file->planNgpus, options.planFile);
  int n = options.planNgpus > 0 ? options.planNgpus
                                : (file->planNgpus > 0 ? file->planNgpus : options.runtimeNgpus);
  if (n > kMaxPlanNgpus)
    return errorf("error: plan_ngpus {} is above the limit of {} devices for one model copy ({})",
                  n, kMaxPlanNgpus, options.planFile);
  if (options.runtimeNgpus % n != 0)
    return errorf("error: --runtime-ngpus {} is not a multiple of plan_ngpus {} ({})",
                  options.runtimeNgpus, n, options.planFile);
  if (options.zero >= 0 && file->zero >= 0 && options.zero != file->zero)
    return errorf("error: --zero {} disagrees with zero {} in {}", options.zero, file->zero,
                  options.planFile);
  auto plan = file->stages.empty() ? applyPlanFile(graph, *file, n, options.runtimeNgpus)
                                   : makeFromStagedFile(graph, options, *file);
  if (options.zeroNgroups >= 0 && file->zeroNgroups >= 0 &&
      options.zeroNgroups != file->zeroNgroups)
    return errorf("error: --zero-ngroups {} disagrees with zero_ngroups {} in {}",
                  options.zeroNgroups, file->zeroNgroups, options.planFile);
  if (plan && file->zero >= 0)
    plan->set_zero(file->zero);
  if (plan && file->zeroNgroups >= 0)
    plan->set_zero_ngroups(file->zeroNgroups);
  if (plan && file->stages.empty() && file->microBatches > 0) {
    if (options.microBatches != 1 && options.microBatches != file->microBatches)
      return errorf("error: --micro-batches {} disagrees with micro_batches {} in {}",
                    options.microBatches, file->microBatches, options.planFile);
    plan->set_micro_batches(file->microBatches);
  }
  return plan;
}

bool planFileHasStages(const std::string &path) {
  auto file = readPlanFile(path);
  return file && !file->stages.empty();
}

} // namespace nnsc::plan
