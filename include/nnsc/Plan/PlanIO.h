#pragma once
/// plan.pb on disk, and the `nnsc-plan` tool's two jobs as library calls.

#include <functional>
#include <ostream>
#include <string>

#include "nnsc/IR/Graph.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Plan/PlanPrinter.h"
#include "nnsc/Support/Status.h"

namespace nnsc::plan {

/// Writes `plan` to `path` atomically (binary protobuf).
Status writePlan(const proto::Plan &plan, const std::string &path);

/// Reads a plan.pb; errors name the file: "p.pb: error: not an nnsc plan ...".
/// Only the envelope is checked (version, device counts); use validatePlan
/// against the graph for the rest.
Expected<proto::Plan> readPlan(const std::string &path);
/// As readPlan, from the file's `bytes`; `path` names it in errors.
Expected<proto::Plan> parsePlan(const std::string &bytes, const std::string &path);

/// Reads the graph a plan was made for: `override` when non-empty, else the
/// plan's recorded path, tried as given and then beside the plan file.
/// Fails when the graph's fingerprint differs from the plan's.
Expected<ir::Graph> readPlanGraph(const proto::Plan &plan, const std::string &planPath,
                                  const std::string &override);

/// A later stage's look at a finished plan (the tool passes the partition
/// pass, which lives above Plan in the layering): an error rejects the plan
/// before it is written; the text is printed after the node table.
using PlanCheck =
    std::function<Expected<std::string>(const proto::Plan &plan, const ir::Graph &graph)>;

/// Where nnsc-plan writes what it made; empty paths are not written.
struct PlanOutputs {
  std::string plan;     ///< plan.pb
  std::string planFile; ///< the plan as a plan file (PlanFile.h writePlanFile)
  std::string report;   ///< the plan report (nnsc-plan --report), made by reportPage
  std::function<Expected<std::string>(const proto::Plan &plan, const ir::Graph &graph)>
      reportPage;
};

/// `nnsc-plan GRAPH.pb --policy P ... [-o PLAN.pb] [--save-plan-file F]
/// [--print]`: plans the graph, runs `check` (if any), writes the outputs
/// and prints the plan's text form (and check's text) to `out` when
/// `print`; one line to `log` says what was written. Nothing is written
/// when any step fails. Under mixed precision (printOptions.memory) the
/// policies, the check and the printout see the graph in the dtypes it runs
/// in (cost::atPrecision); the plan keeps the graph file's fingerprint.
Status runPlanTool(const std::string &graphPath, const PlanOptions &options,
                   const PlanOutputs &outputs, bool print, std::ostream &out, std::ostream &log,
                   const PlanCheck &check = {}, const PrintOptions &printOptions = {});

/// `nnsc-plan PLAN.pb --report FILE`: the report of a plan written before
/// (outputs.report, made by outputs.reportPage), for the graph it names or
/// `graphOverride`, in the dtypes of `precision`; one line to `log` says
/// what was written.
Status reportPlanFile(const std::string &planPath, const std::string &graphOverride,
                      const PlanOutputs &outputs, std::ostream &log,
                      cost::Precision precision = cost::Precision::Float32);

/// `nnsc-plan --print PLAN.pb [--graph GRAPH.pb]`: the text form of a plan
/// file, followed by check's text (both in printOptions.memory's precision).
Status printPlanFile(const std::string &planPath, const std::string &graphOverride,
                     std::ostream &out, const PlanCheck &check = {},
                     const PrintOptions &printOptions = {});

} // namespace nnsc::plan
