// Reading user plan files (PlanFile.h, docs/plan-files.md).
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Plan/PlanFile.h"
#include "nnsc/Support/File.h"
#include "RuleReader.h"

namespace nnsc::plan {

namespace {

class PlanFileReader : RuleReader {
public:
  PlanFileReader(std::string path, std::string text) : RuleReader(path, text) {
    file_.path = std::move(path);
    file_.text = std::move(text);
  }
  Expected<PlanFile> read();

private:
  Status readTop(const YAML::Node &root);
  Status readDefault(const YAML::Node &n);
  Status readRule(const YAML::Node &n);
  Status readPartition(const YAML::Node &n, PlanRule &rule) const;
  Status readPartitionMap(const YAML::Node &n, PlanRule &rule) const;
  Status readInputs(const YAML::Node &n);
  Status readRecompute(const YAML::Node &n);
  Status readRecomputeEntry(const YAML::Node &n);
  Status readPipeline(const YAML::Node &root);

  PlanFile file_;
};

Expected<PlanFile> PlanFileReader::read() {
  auto root = parse();
  if (!root)
    return root.status();
  if (!root->IsMap())
    return errorAtTop("expected a map with keys 'plan_ngpus', 'default', 'rules'");
  NNSC_RETURN_IF_ERROR(readTop(*root));
  return file_;
}

Status PlanFileReader::readTop(const YAML::Node &root) {
  NNSC_RETURN_IF_ERROR(
      checkKeys(root,
                {"plan_ngpus", "default", "rules", "inputs", "recompute", "zero", "zero_ngroups",
                 "stages", "schedule", "virtual_stages", "micro_batches"},
                "the plan file"));
  NNSC_RETURN_IF_ERROR(readPipeline(root));
  if (const YAML::Node n = root["inputs"])
    NNSC_RETURN_IF_ERROR(readInputs(n));
  if (const YAML::Node n = root["recompute"])
    NNSC_RETURN_IF_ERROR(readRecompute(n));
  if (const YAML::Node n = root["plan_ngpus"]) {
    auto v = readInt(n, "plan_ngpus", 1);
    if (!v)
      return v.status();
    file_.planNgpus = static_cast<int>(*v);
  }
  if (const YAML::Node n = root["zero"]) {
    auto v = readInt(n, "zero", 0);
    if (!v)
      return v.status();
    if (*v > kMaxZeroStage)
      return errorAt(n, fmt::format("unsupported zero {}; expected 0 (off), 1 (optimizer "
                                    "states sharded over the data-parallel copies), 2 "
                                    "(gradients too) or 3 (parameters too)",
                                    *v));
    file_.zero = static_cast<int>(*v);
    // ZeRO-2 reduces every micro-batch; a pipeline accumulates (Validate.cpp).
    if (file_.zero >= 2 && !file_.stages.empty())
      return errorAt(n, fmt::format("zero {0} with pipeline 'stages': ZeRO-{0} reduce-scatters "
                                    "each micro-batch's gradients, a pipeline accumulates them "
                                    "over its schedule; use zero 1",
                                    file_.zero));
  }
  if (const YAML::Node n = root["zero_ngroups"]) {
    auto v = readInt(n, "zero_ngroups", 1);
    if (!v)
      return v.status();
    file_.zeroNgroups = static_cast<int>(*v);
  }
  if (const YAML::Node n = root["default"])
    NNSC_RETURN_IF_ERROR(readDefault(n));
  const YAML::Node rules = root["rules"];
  if (!rules)
    return errorAtTop("the plan file has no 'rules'");
  if (!rules.IsSequence())
    return errorAt(rules, "'rules' must be a list of rules");
  for (const YAML::Node &r : rules)
    NNSC_RETURN_IF_ERROR(readRule(r));
  return Status::ok();
}

Status PlanFileReader::readPipeline(const YAML::Node &root) {
  if (const YAML::Node n = root["micro_batches"]) {
    auto v = readInt(n, "micro_batches", 1);
    if (!v)
      return v.status();
    if (*v > kMaxMicroBatches)
      return errorAt(n, fmt::format("impossible micro_batches {}; expected 1 to {}", *v,
                                    kMaxMicroBatches));
    file_.microBatches = static_cast<int>(*v);
  }
  const YAML::Node stages = root["stages"];
  for (const char *key : {"schedule", "virtual_stages"})
    if (root[key] && !stages)
      return errorAt(root[key], fmt::format("'{}' needs 'stages' (the pipeline stages)", key));
  if (!stages)
    return Status::ok();
  file_.stagesPos = posOf(stages);
  if (!stages.IsSequence() || stages.size() < 2)
    return errorAt(stages, "'stages' must list two or more pipeline stages, each a module path "
                           "glob or a list of them");
  if (stages.size() > static_cast<size_t>(kMaxPipelineStages))
    return errorAt(stages, fmt::format("'stages' lists {} stages; the limit is {}", stages.size(),
                                       kMaxPipelineStages));
  for (const YAML::Node &entry : stages) {
    StageRule stage;
    stage.pos = posOf(entry);
    bool globs = entry.IsScalar() || (entry.IsSequence() && std::all_of(entry.begin(), entry.end(),
                                                                       [](const YAML::Node &g) {
                                                                         return g.IsScalar();
                                                                       }));
    if (!globs)
      return errorAt(entry, "a stage is a module path glob or a list of them");
    NNSC_RETURN_IF_ERROR(readStrings(entry, stage.modules, "stage"));
    if (stage.modules.empty())
      return errorAt(entry, "a stage lists no module path glob");
    file_.stages.push_back(std::move(stage));
  }
  if (const YAML::Node n = root["virtual_stages"]) {
    auto v = readInt(n, "virtual_stages", 1);
    if (!v)
      return v.status();
    if (*v > kMaxVirtualStages)
      return errorAt(n, fmt::format("impossible virtual_stages {}; expected 1 to {}", *v,
                                    kMaxVirtualStages));
    if (file_.stages.size() % static_cast<size_t>(*v) != 0)
      return errorAt(n, fmt::format("virtual_stages {} does not divide the {} stages listed", *v,
                                    file_.stages.size()));
    file_.virtualStages = static_cast<int>(*v);
  }
  if (const YAML::Node n = root["schedule"]) {
    const auto &known = pipelineSchedules();
    if (!n.IsScalar() || std::find(known.begin(), known.end(), n.Scalar()) == known.end())
      return errorAt(n, fmt::format("unknown schedule '{}'; expected one of: {}",
                                    n.IsScalar() ? n.Scalar() : std::string("?"),
                                    fmt::join(known, ", ")));
    file_.schedule = n.Scalar();
  }
  bool interleaved = file_.schedule == "interleaved";
  if (file_.virtualStages > 1 && !file_.schedule.empty() && !interleaved)
    return errorAt(root["schedule"], fmt::format("virtual_stages {} needs schedule: interleaved",
                                                 file_.virtualStages));
  if (interleaved && file_.virtualStages < 2)
    return errorAt(root["schedule"], "schedule interleaved needs virtual_stages 2 or more (the "
                                     "model chunks each physical stage holds)");
  return Status::ok();
}

Status PlanFileReader::readInputs(const YAML::Node &n) {
  if (!n.IsSequence())
    return errorAt(n, "'inputs' must be a list of maps {name, dim, num}");
  for (const YAML::Node &entry : n) {
    if (!entry.IsMap())
      return errorAt(entry, "an input entry is a map {name, dim, num}");
    NNSC_RETURN_IF_ERROR(checkKeys(entry, {"name", "dim", "num"}, "an input entry"));
    InputRule in;
    in.pos = posOf(entry);
    const YAML::Node name = entry["name"];
    if (!name || !name.IsScalar() || name.Scalar().empty())
      return errorAt(entry, "an input entry needs 'name': the graph input's argument name");
    in.name = name.Scalar();
    if (!entry["dim"])
      return errorAt(entry, "an input entry needs 'dim'");
    auto dim = readInt(entry["dim"], "dim", 0);
    if (!dim)
      return dim.status();
    in.dim = static_cast<int>(*dim);
    if (const YAML::Node num = entry["num"]) {
      auto v = readInt(num, "num", 1);
      if (!v)
        return v.status();
      in.num = static_cast<int>(*v);
    }
    file_.inputs.push_back(std::move(in));
  }
  return Status::ok();
}

Status PlanFileReader::readRecompute(const YAML::Node &n) {
  if (!n.IsSequence())
    return errorAt(n, "'recompute' must be a list of module path globs or maps {module: GLOBS}, "
                      "{class: NAMES}, {node: IDS}");
  for (const YAML::Node &entry : n)
    NNSC_RETURN_IF_ERROR(readRecomputeEntry(entry));
  return Status::ok();
}

Status PlanFileReader::readRecomputeEntry(const YAML::Node &n) {
  RecomputeSelector s;
  s.pos = posOf(n);
  if (n.IsScalar()) {
    s.patterns.push_back(n.Scalar());
    file_.recompute.push_back(std::move(s));
    return Status::ok();
  }
  if (!n.IsMap() || n.size() != 1)
    return errorAt(n, "a recompute entry is a module path glob or a map with one key: module, "
                      "class or node");
  NNSC_RETURN_IF_ERROR(checkKeys(n, {"module", "class", "node"}, "a recompute entry"));
  if (n["module"]) {
    NNSC_RETURN_IF_ERROR(readStrings(n["module"], s.patterns, "module"));
  } else if (n["class"]) {
    s.kind = RecomputeSelector::ModuleClass;
    NNSC_RETURN_IF_ERROR(readStrings(n["class"], s.patterns, "class"));
  } else {
    s.kind = RecomputeSelector::Nodes;
    PlanRule ids; // node lists read as a rule's selector
    NNSC_RETURN_IF_ERROR(readSelectors(n, ids));
    s.nodes = ids.nodes;
  }
  file_.recompute.push_back(std::move(s));
  return Status::ok();
}

Status PlanFileReader::readDefault(const YAML::Node &n) {
  std::string v = n.IsScalar() ? n.Scalar() : "";
  if (v == "replicate")
    file_.defaultAction = RuleAction::Replicate;
  else if (v == "follow")
    file_.defaultAction = RuleAction::Follow;
  else
    return errorAt(n, fmt::format("unknown default '{}'; expected one of: replicate, follow", v));
  return Status::ok();
}

Status PlanFileReader::readRule(const YAML::Node &n) {
  if (!n.IsMap())
    return errorAt(n, "a rule must be a map with selectors (module, op, node, class, nth) and "
                      "'partition'");
  NNSC_RETURN_IF_ERROR(
      checkKeys(n, {"module", "op", "node", "class", "nth", "partition"}, "a rule"));
  if (n.size() == 0) // no first key to point at (and nothing to select)
    return errorAt(n, "an empty rule; give selectors (module, op, node, class, nth) and "
                      "'partition'");
  PlanRule rule;
  rule.pos = posOf(n.begin()->first);
  NNSC_RETURN_IF_ERROR(readSelectors(n, rule));
  if (!n["partition"])
    return errorAt(n, "the rule has no 'partition' (a map, 'replicate' or 'follow')");
  NNSC_RETURN_IF_ERROR(readPartition(n["partition"], rule));
  file_.rules.push_back(std::move(rule));
  return Status::ok();
}

Status PlanFileReader::readPartition(const YAML::Node &n, PlanRule &rule) const {
  if (n.IsMap())
    return readPartitionMap(n, rule);
  std::string v = n.IsScalar() ? n.Scalar() : "";
  if (v == "replicate")
    rule.action = RuleAction::Replicate;
  else if (v == "follow")
    rule.action = RuleAction::Follow;
  else
    return errorAt(n, fmt::format("unknown partition '{}'; expected a map {{ident, num}} or "
                                  "{{input, dim, num}}, 'replicate' or 'follow'",
                                  v));
  return Status::ok();
}

Status PlanFileReader::readPartitionMap(const YAML::Node &n, PlanRule &rule) const {
  NNSC_RETURN_IF_ERROR(checkKeys(n, {"ident", "input", "dim", "num", "interleave"}, "a partition"));
  rule.action = RuleAction::Partition;
  if (const YAML::Node id = n["ident"]) {
    if (!id.IsScalar() || id.Scalar().empty())
      return errorAt(id, "'ident' must name an identifier of the op's annotation");
    if (n["input"] || n["dim"])
      return errorAt(id, "give either 'ident' or 'input' and 'dim', not both");
    rule.ident = id.Scalar();
  } else if (n["input"] && n["dim"]) {
    auto input = readInt(n["input"], "input", 0);
    if (!input)
      return input.status();
    auto dim = readInt(n["dim"], "dim", INT32_MIN);
    if (!dim)
      return dim.status();
    rule.input = static_cast<int>(*input);
    rule.dim = static_cast<int>(*dim);
  } else {
    return errorAt(n, "a partition needs 'ident', or 'input' and 'dim'");
  }
  if (const YAML::Node num = n["num"]) {
    auto v = readInt(num, "num", 1);
    if (!v)
      return v.status();
    rule.num = static_cast<int>(*v);
  }
  if (const YAML::Node blocks = n["interleave"]) {
    auto v = readInt(blocks, "interleave", 1);
    if (!v)
      return v.status();
    rule.interleave = static_cast<int>(*v);
  }
  return Status::ok();
}

} // namespace

Expected<PlanFile> parsePlanFile(const std::string &text, const std::string &path) {
  return PlanFileReader(path, text).read();
}

Expected<PlanFile> readPlanFile(const std::string &path) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parsePlanFile(*text, path);
}

} // namespace nnsc::plan
