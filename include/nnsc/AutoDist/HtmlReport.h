#pragma once
/// `nnsc-plan --report plan.html`: one self-contained page (inline CSS and
/// SVG, no scripts, nothing fetched) that shows a plan as the cost model
/// sees it -- the configurations autodist tried and why it chose one; the
/// predicted step of every plan device split into compute, communication,
/// exposed gradient reductions, pipeline waiting and the optimizer; memory
/// per device against the limit; how each layer's ops are cut over the
/// devices (layers cut alike shown once); and the ops that cost the most.
/// Any policy's plan can be reported; the autodist part needs its search.

#include <string>

#include "nnsc/AutoDist/AutoDist.h"
#include "nnsc/Cost/Cluster.h"
#include "nnsc/Cost/Memory.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::autodist {

struct HtmlReportInput {
  const ir::Graph *graph = nullptr;
  const proto::Plan *plan = nullptr;
  const cost::Cluster *cluster = nullptr; ///< needs a comm table when plan_ngpus > 1
  cost::MemoryOptions memory;             ///< optimizer and precision
  double memLimit = 0;                    ///< bytes per device; 0: the device's memory
  const Result *search = nullptr;         ///< autodist's trials, when it ran
  int topOps = 20;                        ///< rows of the costliest-ops table
};

/// The page. Errors: the plan does not partition, or a collective the
/// cluster cannot price (the messages of Transform/StepCost.h).
Expected<std::string> htmlReport(const HtmlReportInput &input);

} // namespace nnsc::autodist
