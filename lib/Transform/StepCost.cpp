// Step-time inputs from a partitioned plan (StepCost.h).
#include "nnsc/Transform/StepCost.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PipelineSchedule.h"

namespace nnsc::transform {

std::optional<cost::Collective> collectiveOf(Primitive kind) {
  switch (kind) {
  case Primitive::AllGather:
    return cost::Collective::AllGather;
  case Primitive::AllReduce:
    return cost::Collective::AllReduce;
  case Primitive::ReduceScatter:
    return cost::Collective::ReduceScatter;
  case Primitive::AllToAll:
    return cost::Collective::AllToAll;
  default:
    return std::nullopt;
  }
}

int64_t stagingBytes(Primitive kind, int64_t bytes, const CommOp &op) {
  switch (kind) {
  case Primitive::AllReduce: // the clone the sum is made in
  case Primitive::AllGather: // the concatenation of the gathered parts
    return 2 * bytes;
  case Primitive::ReduceScatter: {
    // Chunks along the dim are contiguous when every dim before it is 1.
    auto rank = static_cast<int64_t>(op.outShape.size());
    int64_t dim = op.args.empty() ? 0 : op.args[0];
    if (dim < 0)
      dim += rank;
    int64_t leading = 1;
    for (int64_t i = 0; i < dim && i < rank; ++i)
      leading *= op.outShape[static_cast<size_t>(i)];
    return leading == 1 ? 0 : 2 * bytes;
  }
  case Primitive::AllToAll: // stacked before, concatenated after
    return 4 * bytes;
  default:
    return 0;
  }
}

RvdCostFn tableRvdCost(const cost::Cluster &cluster) {
  return [&cluster](Primitive kind, int64_t bytes, int groupSize) -> double {
    auto c = collectiveOf(kind);
    if (!c || groupSize <= 1)
      return 0.0;
    cost::Placement place =
        groupSize <= cluster.devicesPerNode ? cost::Placement::Intra : cost::Placement::Inter;
    auto t = cluster.comm->time(*c, bytes, groupSize, place);
    // A table without the collective: the alpha-beta default keeps the
    // search going (the step-time model reports the gap as an error).
    return t ? *t : AlphaBetaCost{}(kind, bytes, groupSize);
  };
}

namespace {

// nccl-tests' size of one CommOp: the larger of a rank's buffers, the same
// forward and backward (a reduce_scatter's input is n times its output).
int64_t commOpBytes(const ir::Graph &graph, const Adapter &a, const CommOp &op, size_t group) {
  int64_t out = ir::numel(op.outShape) * ir::dtypeSize(graph.tensor(a.tensor).dtype);
  return op.forward == Primitive::ReduceScatter ? out * static_cast<int64_t>(group) : out;
}

void addAdapterCalls(const ir::Graph &graph, const PartitionedGraph &pg,
                     std::vector<cost::StepInput> &inputs) {
  for (const Adapter &a : pg.adapters)
    for (const CommOp &op : a.ops)
      for (const std::vector<int> &members : op.groups) {
        int64_t bytes = commOpBytes(graph, a, op, members.size());
        for (int d : members) {
          auto &comm = inputs[static_cast<size_t>(d)].comm;
          if (auto c = collectiveOf(op.forward))
            comm.push_back(
                {*c, bytes, members, false, a.stage, stagingBytes(op.forward, bytes, op)});
          if (auto c = collectiveOf(op.backward); c && a.needsGrad)
            comm.push_back(
                {*c, bytes, members, true, a.stage, stagingBytes(op.backward, bytes, op)});
        }
      }
}

// The rank group of a gradient held by `devices` in every copy.
std::vector<int> reducerRanks(const std::vector<int> &devices, int planNgpus, int copies) {
  std::vector<int> ranks;
  for (int c = 0; c < copies; ++c)
    for (int d : devices)
      ranks.push_back(c * planNgpus + d);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

// The index of the first part reading each tensor (tensor id -> part).
int firstReadOn(const std::unordered_map<int64_t, int> &readers, int64_t tensor, size_t parts) {
  auto it = readers.find(tensor);
  return it == readers.end() ? static_cast<int>(parts) : it->second;
}

std::unordered_map<int64_t, int> firstReaders(const std::vector<cost::DevicePart> &parts) {
  std::unordered_map<int64_t, int> first;
  for (size_t i = 0; i < parts.size(); ++i)
    for (int64_t t : parts[i].inputIds)
      first.emplace(t, static_cast<int>(i));
  return first;
}

void addGrads(const ir::Graph &graph, const proto::Plan &plan, const PartitionedGraph &pg,
              const std::vector<cost::DeviceLoad> &loads, bool float32Wire,
              std::vector<cost::StepInput> &inputs) {
  int copies = plan.runtime_ngpus() / plan.plan_ngpus();
  std::map<std::pair<int64_t, int>, std::vector<int>> holders; // (tensor, device) -> devices
  for (const GradReducer &r : pg.reducers)
    for (int d : r.devices)
      holders[{r.tensor, d}] = r.devices;
  std::vector<std::unordered_map<int64_t, int>> readers;
  for (const cost::DeviceLoad &load : loads)
    readers.push_back(firstReaders(load.parts));
  for (const ir::Tensor &t : graph.tensors()) {
    if (t.kind != ir::TensorKind::Param || !t.requiresGrad)
      continue;
    for (int d = 0; d < pg.numDevices; ++d) {
      const SubTensor *piece = pg.tensors[static_cast<size_t>(t.id)].pieceOn(d);
      if (!piece)
        continue;
      auto it = holders.find({t.id, d});
      std::vector<int> devices = it == holders.end() ? std::vector<int>{d} : it->second;
      cost::StepInput &in = inputs[static_cast<size_t>(d)];
      double elements = static_cast<double>(ir::numel(piece->shape()));
      int64_t wire = float32Wire && ir::isFloatingPoint(t.dtype) ? 4 : ir::dtypeSize(t.dtype);
      in.grads.push_back({t.id, static_cast<int64_t>(elements) * wire,
                          reducerRanks(devices, plan.plan_ngpus(), copies),
                          firstReadOn(readers[static_cast<size_t>(d)], t.id,
                                      loads[static_cast<size_t>(d)].parts.size())});
      for (const cost::StateHolding &h : loads[static_cast<size_t>(d)].state)
        if (h.tensor == t.id)
          in.grads.back().recomputeGroup = h.recomputeGroup;
      // ZeRO-3 gathers the values in the training dtype: 16-bit in mixed precision.
      int64_t valueSize = float32Wire && ir::isFloatingPoint(t.dtype) ? 2 : ir::dtypeSize(t.dtype);
      in.grads.back().valueBytes = static_cast<int64_t>(elements) * valueSize;
      in.trainableElements += elements;
      in.trainableTensors += 1;
    }
  }
}

// One virtual stage's share of a device's input: its parts and collectives.
cost::StepInput stageShare(const cost::StepInput &in, const proto::Plan &plan, int stage) {
  cost::StepInput out;
  out.device = in.device;
  for (size_t i = 0; i < in.parts.size(); ++i)
    if (plan.nodes(static_cast<int>(in.parts[i].node->id)).stage() == stage) {
      out.parts.push_back(in.parts[i]);
      out.recomputed.push_back(i < in.recomputed.size() && in.recomputed[i]);
      out.groups.push_back(i < in.groups.size() ? in.groups[i] : -1);
    }
  for (const cost::CommCall &c : in.comm)
    if (c.stage == stage)
      out.comm.push_back(c);
  return out;
}

// A pipelined plan: per virtual stage the slowest device's passes, per
// crossing the send/recv of each activation piece (the pieces of one tensor
// travel in parallel, one pair of devices each), then every stage's schedule
// run against the others.
Expected<std::vector<cost::StepBreakdown>>
pipelinedStep(const ir::Graph &graph, const proto::Plan &plan, const PartitionedGraph &pg,
              const cost::Cluster &cluster, const cost::StepOptions &options,
              const std::vector<cost::StepInput> &inputs, std::vector<cost::StepBreakdown> out) {
  const int stages = plan::physicalStages(plan);
  const int virtualStages = plan.stages_size();
  const int chunks = virtualStages / stages;
  const int micro = std::max(1, plan.micro_batches());
  plan::PassSeconds seconds;
  seconds.forward.assign(static_cast<size_t>(virtualStages), 0.0);
  seconds.backward.assign(static_cast<size_t>(virtualStages), 0.0);
  seconds.transfer.assign(static_cast<size_t>(virtualStages - 1), 0.0);
  std::vector<int> physicalOf(inputs.size(), 0);
  for (int vs = 0; vs < virtualStages; ++vs)
    for (int d : plan.stages(vs).devices()) {
      physicalOf[static_cast<size_t>(d)] = vs % stages;
      auto share =
          cost::stepTime(stageShare(inputs[static_cast<size_t>(d)], plan, vs), cluster, options);
      if (!share)
        return share.status();
      size_t k = static_cast<size_t>(vs);
      seconds.forward[k] = std::max(seconds.forward[k], share->forwardCompute + share->forwardComm);
      seconds.backward[k] =
          std::max(seconds.backward[k], share->backwardCompute + share->backwardComm);
    }
  for (const StageTransfer &t : pg.transfers) {
    if (t.to < 1 || t.to > virtualStages - 1 || t.source.numDevices() == 0)
      continue;
    int64_t bytes = t.source.pieceElements() * ir::dtypeSize(graph.tensor(t.tensor).dtype);
    auto sec = cluster.commTime(cost::Collective::SendRecv, bytes,
                                {t.source.devices().front(), t.target.devices().front()});
    if (!sec)
      return sec.status();
    seconds.transfer[static_cast<size_t>(t.to - 1)] += *sec;
  }
  std::vector<std::vector<plan::PipelinePass>> perStage;
  for (int p = 0; p < stages; ++p) {
    auto passes = plan::pipelinePasses(plan.schedule().empty() ? "1f1b" : plan.schedule(), stages,
                                       chunks, micro, p);
    if (!passes)
      return passes.status();
    perStage.push_back(passes.take());
  }
  auto finish = plan::timeSchedules(perStage, chunks, micro, seconds);
  if (!finish)
    return finish.status();
  for (cost::StepBreakdown &b : out) {
    int p = physicalOf[static_cast<size_t>(b.device)];
    double busy = 0;
    for (int c = 0; c < chunks; ++c) {
      size_t k = static_cast<size_t>(c * stages + p);
      busy += micro * (seconds.forward[k] + seconds.backward[k]);
    }
    b.scheduleSeconds = (*finish)[static_cast<size_t>(p)];
    b.bubbleSeconds = std::max(0.0, b.scheduleSeconds - busy);
    // The runtime arms each parameter's reduction before the last backward
    // that adds to it: the buckets go out during the stage's last backward
    // pass (earlier for a later chunk, which this leaves aside), so what
    // that pass does not cover is exposed.
    const plan::PipelinePass &lastPass = perStage[static_cast<size_t>(p)].back();
    double lastBackward = seconds.backward[static_cast<size_t>(lastPass.chunk * stages + p)];
    b.gradReduceExposed = std::max(0.0, b.gradReduce - lastBackward);
  }
  return out;
}

} // namespace

std::vector<cost::StepInput> stepInputs(const ir::Graph &graph, const proto::Plan &plan,
                                        const PartitionedGraph &pg,
                                        const cost::MemoryOptions &memory) {
  std::vector<cost::DeviceLoad> loads = plan::deviceLoads(graph, plan);
  std::vector<cost::StepInput> inputs(loads.size());
  for (size_t d = 0; d < loads.size(); ++d) {
    inputs[d].device = static_cast<int>(d);
    for (const cost::DevicePart &p : loads[d].parts) {
      inputs[d].parts.push_back(p.shapes);
      inputs[d].recomputed.push_back(p.recomputeGroup >= 0);
      inputs[d].groups.push_back(p.recomputeGroup);
    }
  }
  addAdapterCalls(graph, pg, inputs);
  addGrads(graph, plan, pg, loads, cost::isMixed(memory.precision), inputs);
  // A split plan, or ZeRO over data-parallel copies, sums the gradient norm
  // over the world every step (Runtime/Trainer.cpp gradientNorm).
  if (plan.plan_ngpus() > 1 || (plan.zero() > 0 && plan.runtime_ngpus() > plan.plan_ngpus())) {
    std::vector<int> world(static_cast<size_t>(std::max(1, plan.runtime_ngpus())));
    std::iota(world.begin(), world.end(), 0);
    for (cost::StepInput &in : inputs)
      in.normRanks = world;
  }
  return inputs;
}

Expected<std::vector<cost::StepBreakdown>>
estimateStep(const ir::Graph &graph, const proto::Plan &plan, const PartitionedGraph &pg,
             const cost::Cluster &cluster, cost::StepOptions options) {
  options.microBatches = std::max(1, plan.micro_batches());
  options.memory.zero = plan.zero();
  options.memory.zeroNgroups = std::max(1, plan.zero_ngroups());
  if (plan.zero() > 0 && plan.zero_ngroups() > 1)
    options.zeroBlockRanks = plan.runtime_ngpus() / plan.zero_ngroups();
  std::vector<cost::StepBreakdown> out;
  std::vector<cost::StepInput> inputs = stepInputs(graph, plan, pg, options.memory);
  for (const cost::StepInput &in : inputs) {
    auto s = cost::stepTime(in, cluster, options);
    if (!s)
      return s.status();
    out.push_back(*s);
  }
  if (plan::physicalStages(plan) > 1)
    return pipelinedStep(graph, plan, pg, cluster, options, inputs, std::move(out));
  return out;
}

} // namespace nnsc::transform
