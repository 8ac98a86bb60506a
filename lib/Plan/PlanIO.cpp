#include "nnsc/Plan/PlanIO.h"

#include <filesystem>

#include <fmt/format.h>

#include "nnsc/Cost/PrecisionView.h"
#include "nnsc/IR/Serialize.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/PlanFile.h"
#include "nnsc/Plan/PlanPrinter.h"
#include "nnsc/Support/File.h"

namespace nnsc::plan {

namespace fs = std::filesystem;

Status writePlan(const proto::Plan &plan, const std::string &path) {
  std::string bytes;
  if (!plan.SerializeToString(&bytes))
    return Status::internal(fmt::format("{}: error: cannot serialize the plan", path));
  return writeFileAtomic(path, bytes);
}

Expected<proto::Plan> readPlan(const std::string &path) {
  auto bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  return parsePlan(*bytes, path);
}

Expected<proto::Plan> parsePlan(const std::string &bytes, const std::string &path) {
  proto::Plan plan;
  if (!plan.ParseFromString(bytes) || plan.policy().empty() || plan.plan_ngpus() == 0)
    return errorf("{}: error: not an nnsc plan (written by nnsc-plan -o PLAN.pb)", path);
  Status st = checkPlanEnvelope(plan);
  if (!st)
    return Status::error(fmt::format("{}: error: {}", path, st.message()));
  return plan;
}

namespace {

// The recorded graph path as given, else a graph of that name beside the plan.
std::string locateGraph(const proto::Plan &plan, const std::string &planPath) {
  fs::path recorded(plan.graph());
  if (recorded.empty() || fs::exists(recorded))
    return plan.graph();
  fs::path beside = fs::path(planPath).parent_path() / recorded.filename();
  return fs::exists(beside) ? beside.string() : plan.graph();
}

} // namespace

Expected<ir::Graph> readPlanGraph(const proto::Plan &plan, const std::string &planPath,
                                  const std::string &override) {
  std::string graphPath = override.empty() ? locateGraph(plan, planPath) : override;
  if (graphPath.empty())
    return errorf("{}: error: the plan names no graph; pass --graph GRAPH.pb", planPath);
  auto graph = ir::readGraph(graphPath);
  if (!graph)
    return graph.status();
  if (plan.graph_fingerprint() != 0 && plan.graph_fingerprint() != graphFingerprint(*graph))
    return errorf("{}: error: the plan was made for another graph than {} (fingerprints "
                  "differ); re-run nnsc-plan on it",
                  planPath, graphPath);
  Status st = validatePlan(plan, *graph);
  if (!st)
    return Status::error(fmt::format("{}: error: {}", planPath, st.message()));
  return graph;
}

namespace {

Expected<std::string> runCheck(const PlanCheck &check, const proto::Plan &plan,
                               const ir::Graph &graph) {
  if (!check)
    return std::string();
  return check(plan, graph);
}

} // namespace

Status runPlanTool(const std::string &graphPath, const PlanOptions &options,
                   const PlanOutputs &outputs, bool print, std::ostream &out, std::ostream &log,
                   const PlanCheck &check, const PrintOptions &printOptions) {
  NNSC_RETURN_IF_ERROR(checkOptions(options));
  auto graph = ir::readGraph(graphPath);
  if (!graph)
    return graph.status();
  if (Status st = checkAnnotations(*graph); !st)
    return st.withContext(graphPath + ": error");
  PlanOptions opts = options;
  opts.graphPath = graphPath;
  uint64_t fingerprint = graphFingerprint(*graph);
  graph = cost::atPrecision(*graph, printOptions.memory.precision);
  auto plan = makePlan(*graph, opts);
  if (!plan)
    return plan.status();
  plan->set_graph_fingerprint(fingerprint);
  auto extra = runCheck(check, *plan, *graph);
  if (!extra)
    return extra.status();
  std::string planFileText;
  if (!outputs.planFile.empty()) {
    std::vector<std::string> header = {
        fmt::format("written by nnsc-plan --policy {} for {} ({} ranks)", plan->policy(),
                    graphPath, plan->runtime_ngpus()),
        "re-plan with: nnsc-plan GRAPH.pb --policy file --plan-file THIS.yaml --runtime-ngpus N",
        "rules select module paths ('*' for every layer), op names and nth, the place of a",
        "node among its module's nodes of that op; unlisted nodes are replicated"};
    if (plan->stages_size() > 1)
      header.push_back("stages: the modules of each pipeline stage in order; the rules split "
                       "within a stage's devices");
    auto text = writePlanFile(*graph, *plan, header);
    if (!text)
      return text.status();
    planFileText = text.take();
  }
  std::string reportText;
  if (!outputs.report.empty()) {
    if (!outputs.reportPage)
      return Status::error("error: no report page maker given for " + outputs.report);
    auto page = outputs.reportPage(*plan, *graph);
    if (!page)
      return page.status();
    reportText = page.take();
  }
  OutputTransaction written; // plan.pb, the plan file and the report together, or none
  if (!outputs.plan.empty())
    NNSC_RETURN_IF_ERROR(writePlan(*plan, outputs.plan));
  if (!outputs.planFile.empty())
    NNSC_RETURN_IF_ERROR(writeFileAtomic(outputs.planFile, planFileText));
  if (!outputs.report.empty())
    NNSC_RETURN_IF_ERROR(writeFileAtomic(outputs.report, reportText));
  NNSC_RETURN_IF_ERROR(written.commit());
  if (!outputs.plan.empty())
    log << fmt::format("nnsc-plan: wrote {} (policy {}, plan_ngpus {}, runtime_ngpus {})\n",
                       outputs.plan, plan->policy(), plan->plan_ngpus(), plan->runtime_ngpus());
  if (!outputs.planFile.empty())
    log << fmt::format("nnsc-plan: wrote {} (the plan as a plan file)\n", outputs.planFile);
  if (!outputs.report.empty())
    log << fmt::format("nnsc-plan: wrote {} (the plan report)\n", outputs.report);
  if (print) {
    printPlan(*plan, *graph, out, printOptions);
    out << *extra;
  }
  return Status::ok();
}

namespace {

// A plan written before and the graph it was made for (readPlanGraph).
struct SavedPlan {
  proto::Plan plan;
  ir::Graph graph;
};

Expected<SavedPlan> readSavedPlan(const std::string &planPath, const std::string &graphOverride,
                                  cost::Precision precision) {
  auto plan = readPlan(planPath);
  if (!plan)
    return plan.status();
  auto graph = readPlanGraph(*plan, planPath, graphOverride);
  if (!graph)
    return graph.status();
  return SavedPlan{plan.take(), cost::atPrecision(*graph, precision)};
}

} // namespace

Status printPlanFile(const std::string &planPath, const std::string &graphOverride,
                     std::ostream &out, const PlanCheck &check, const PrintOptions &printOptions) {
  auto saved = readSavedPlan(planPath, graphOverride, printOptions.memory.precision);
  if (!saved)
    return saved.status();
  auto extra = runCheck(check, saved->plan, saved->graph);
  if (!extra)
    return extra.status().withContext(planPath);
  printPlan(saved->plan, saved->graph, out, printOptions);
  out << *extra;
  return Status::ok();
}

Status reportPlanFile(const std::string &planPath, const std::string &graphOverride,
                      const PlanOutputs &outputs, std::ostream &log, cost::Precision precision) {
  auto saved = readSavedPlan(planPath, graphOverride, precision);
  if (!saved)
    return saved.status();
  if (!outputs.reportPage)
    return Status::error("error: no report page maker given for " + outputs.report);
  auto page = outputs.reportPage(saved->plan, saved->graph);
  if (!page)
    return page.status().withContext(planPath);
  NNSC_RETURN_IF_ERROR(writeFileAtomic(outputs.report, *page));
  log << fmt::format("nnsc-plan: wrote {} (the plan report)\n", outputs.report);
  return Status::ok();
}

} // namespace nnsc::plan
