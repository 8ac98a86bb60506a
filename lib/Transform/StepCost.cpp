// Step-time inputs from a partitioned plan (StepCost.h).
#include "nnsc/Transform/StepCost.h"

#include <algorithm>
#include <map>

#include "nnsc/Plan/Memory.h"

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
            comm.push_back({*c, bytes, members, false});
          if (auto c = collectiveOf(op.backward); c && a.needsGrad)
            comm.push_back({*c, bytes, members, true});
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

int firstReader(const std::vector<cost::DevicePart> &parts, int64_t tensor) {
  for (size_t i = 0; i < parts.size(); ++i)
    if (std::count(parts[i].inputIds.begin(), parts[i].inputIds.end(), tensor))
      return static_cast<int>(i);
  return static_cast<int>(parts.size());
}

void addGrads(const ir::Graph &graph, const proto::Plan &plan, const PartitionedGraph &pg,
              const std::vector<cost::DeviceLoad> &loads, std::vector<cost::StepInput> &inputs) {
  int copies = plan.runtime_ngpus() / plan.plan_ngpus();
  std::map<std::pair<int64_t, int>, std::vector<int>> holders; // (tensor, device) -> devices
  for (const GradReducer &r : pg.reducers)
    for (int d : r.devices)
      holders[{r.tensor, d}] = r.devices;
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
      in.grads.push_back({t.id, static_cast<int64_t>(elements) * ir::dtypeSize(t.dtype),
                          reducerRanks(devices, plan.plan_ngpus(), copies),
                          firstReader(loads[static_cast<size_t>(d)].parts, t.id)});
      in.trainableElements += elements;
      in.trainableTensors += 1;
    }
  }
}

} // namespace

std::vector<cost::StepInput> stepInputs(const ir::Graph &graph, const proto::Plan &plan,
                                        const PartitionedGraph &pg) {
  std::vector<cost::DeviceLoad> loads = plan::deviceLoads(graph, plan);
  std::vector<cost::StepInput> inputs(loads.size());
  for (size_t d = 0; d < loads.size(); ++d) {
    inputs[d].device = static_cast<int>(d);
    for (const cost::DevicePart &p : loads[d].parts) {
      inputs[d].parts.push_back(p.shapes);
      inputs[d].recomputed.push_back(p.recomputeGroup >= 0);
    }
  }
  addAdapterCalls(graph, pg, inputs);
  addGrads(graph, plan, pg, loads, inputs);
  return inputs;
}

Expected<std::vector<cost::StepBreakdown>>
estimateStep(const ir::Graph &graph, const proto::Plan &plan, const PartitionedGraph &pg,
             const cost::Cluster &cluster, cost::StepOptions options) {
  options.microBatches = std::max(1, plan.micro_batches());
  options.memory.zero = plan.zero();
  std::vector<cost::StepBreakdown> out;
  for (const cost::StepInput &in : stepInputs(graph, plan, pg)) {
    auto s = cost::stepTime(in, cluster, options);
    if (!s)
      return s.status();
    out.push_back(*s);
  }
  return out;
}

} // namespace nnsc::transform
