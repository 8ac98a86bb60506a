#pragma once
/// The predicted step time of a partitioned plan (Cost/StepTime.h): each
/// plan device's node parts, the adapters' collectives it takes part in
/// (forward, and backward where a gradient flows), and the gradient
/// reducers' all-reduces -- groups as the rank programs form them: plan
/// devices shifted into every data-parallel copy.

#include <ostream>
#include <vector>

#include "nnsc/Cost/StepTime.h"
#include "nnsc/Transform/Partition.h"
#include "nnsc/Transform/RvdCost.h"

namespace nnsc::transform {

/// The step-time inputs of every plan device (copy 0's ranks; the other
/// copies run the same program on shifted ranks). Under mixed precision
/// (`memory.precision`) gradients are reduced in float32, nnsc-run's
/// precision.grad_reduce_dtype default.
std::vector<cost::StepInput> stepInputs(const ir::Graph &graph, const proto::Plan &plan,
                                        const PartitionedGraph &pg,
                                        const cost::MemoryOptions &memory = {});

/// One breakdown per plan device. A pipelined plan's devices run their
/// stage's schedule (Plan/PipelineSchedule.h timeSchedules): each virtual
/// stage's forward and backward per micro-batch is the slowest of its
/// devices', each stage crossing a send/recv of the activations (and of
/// their gradients back) priced by the comm table. Errors: a collective the
/// cluster's comm table cannot price.
Expected<std::vector<cost::StepBreakdown>>
estimateStep(const ir::Graph &graph, const proto::Plan &plan, const PartitionedGraph &pg,
             const cost::Cluster &cluster, cost::StepOptions options);

/// The collective a non-local primitive runs (all_gather, all_reduce,
/// reduce_scatter, all_to_all); nullopt for a local one.
std::optional<cost::Collective> collectiveOf(Primitive kind);

/// cost::CommCall::stagingBytes of primitive `kind` run by `op` (its args
/// and local shape) at nccl-tests size `bytes`: what the runtime copies on a
/// rank around the backend's call, read plus written.
int64_t stagingBytes(Primitive kind, int64_t bytes, const CommOp &op);

/// An RvdCostFn pricing each step from `cluster`'s comm table, groups
/// placed within a node when they fit one (groupSize <= devicesPerNode).
/// `cluster` must outlive the function and have a comm table.
RvdCostFn tableRvdCost(const cost::Cluster &cluster);

} // namespace nnsc::transform
