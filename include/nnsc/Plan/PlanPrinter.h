#pragma once
/// The text form of a plan (`nnsc-plan --print`):
///
///   plan dp for GPT (67 nodes) from out/gpt/graph.pb
///     plan_ngpus 1, runtime_ngpus 2 (2 data-parallel copies), micro_batches 1, zero 0
///   memory per device (estimate: fp32 adamw, zero 0; ...):
///     device 0: params 38.5 KiB (9,856 elements), grads ..., total 554.3 KiB
///   nodes:
///     node  op              outputs  partition  devices  stage  module
///     0     aten::arange    %19      replicate  [0]      0      <top>
///
/// Output depends only on the plan and the graph.

#include <ostream>
#include <string>

#include "nnsc/Cost/Memory.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// How the memory section is computed: the optimizer and precision
/// (zero and the data-parallel size come from the plan), and the device's
/// capacity (0: unknown, not shown).
struct PrintOptions {
  cost::MemoryOptions memory;
  double capacity = 0;
};

/// Prints `plan` (which must pass validatePlan against `graph`).
void printPlan(const proto::Plan &plan, const ir::Graph &graph, std::ostream &os,
               const PrintOptions &options = {});

/// "1.5 KiB", "25.0 MiB", "12 B": binary units with one decimal.
std::string formatBytes(double bytes);

} // namespace nnsc::plan
