#pragma once
/// The text form of a plan (`nnsc-plan --print`):
///
///   plan dp for GPT (67 nodes) from out/gpt/graph.pb
///     plan_ngpus 1, runtime_ngpus 2 (2 data-parallel copies), micro_batches 1, zero 0
///   memory per device (estimate) ...
///     device 0: params 38.5 KiB (9,856 elements), grads ..., total 554.3 KiB
///   nodes:
///     node  op              outputs  partition  devices  stage  module
///     0     aten::arange    %19      replicate  [0]      0      <top>
///
/// Output depends only on the plan and the graph.

#include <ostream>
#include <string>

#include "nnsc/IR/Graph.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// Prints `plan` (which must pass validatePlan against `graph`).
void printPlan(const proto::Plan &plan, const ir::Graph &graph, std::ostream &os);

/// "1.5 KiB", "25.0 MiB", "12 B": binary units with one decimal.
std::string formatBytes(double bytes);

} // namespace nnsc::plan
