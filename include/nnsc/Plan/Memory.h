#pragma once
/// What each plan device runs and holds under a plan, as the cost model
/// sees it (cost::DeviceLoad: node parts with their local shapes, pieces of
/// parameters and buffers), and the per-device memory the cost model
/// predicts from it (Cost/Memory.h) -- the estimate `nnsc-plan --print` shows.

#include <vector>

#include "nnsc/Cost/Memory.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// One load per plan device 0 .. plan_ngpus-1; `plan` must pass
/// validatePlan. A part's tensor shapes are the full shapes with the split
/// dim divided by the number of parts (a value split leaves outputs whole:
/// partial sums). A parameter or buffer counts once per device, at the
/// largest part any node on it reads; state no node reads sits on device 0.
std::vector<cost::DeviceLoad> deviceLoads(const ir::Graph &graph, const proto::Plan &plan);

/// cost::deviceMemory of every device load; `options.zero` and `dpSize`
/// are taken from the plan.
std::vector<cost::DeviceMemory> estimateMemory(const ir::Graph &graph, const proto::Plan &plan,
                                               cost::MemoryOptions options = {});

} // namespace nnsc::plan
