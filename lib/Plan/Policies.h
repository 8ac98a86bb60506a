#pragma once
// The built-in policies (private to nnsc_plan; Policies.cpp registers them).

#include "nnsc/Plan/Plan.h"

namespace nnsc::plan {

/// dp: one device per copy, every node whole.
Expected<proto::Plan> makeDataParallel(const ir::Graph &graph, const PlanOptions &options);
/// tp: every node split along its first identifier that divides into
/// planDevices(options) parts (or a seeded random one); replicate-only ops
/// and ops with nothing divisible are replicated.
Expected<proto::Plan> makeTensorParallel(const ir::Graph &graph, const PlanOptions &options);
/// hybrid: tp over --plan-ngpus devices; runtime_ngpus / plan_ngpus copies.
Expected<proto::Plan> makeHybrid(const ir::Graph &graph, const PlanOptions &options);
/// data: graph inputs fed split along dim 0; every node split along the
/// identifier that carries that batch dim (followed through annotations);
/// nodes without it replicated.
Expected<proto::Plan> makeDataSplit(const ir::Graph &graph, const PlanOptions &options);
/// file: the rules of a user plan file (PlanFile.h).
/// A file with `stages:` makes the pipelined plan itself (the command
/// line's pipeline options must agree with it).
Expected<proto::Plan> makeFromPlanFile(const ir::Graph &graph, const PlanOptions &options);
/// True when `path` reads as a plan file with `stages:` (false on any error:
/// makeFromPlanFile reports it).
bool planFileHasStages(const std::string &path);

} // namespace nnsc::plan
