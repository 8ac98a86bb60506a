// The job-wide part of rank layouts: the partition pass's result and the
// numbering of every communication group of every data-parallel copy.
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "LayoutParts.h"
#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/Ops/KernelWrites.h"
#include "nnsc/Plan/Recompute.h"

namespace nnsc::codegen {

namespace {

// Collectives whose result does not depend on the members' order (which
// member of a value_split keeps the value is a label: any one will do).
bool orderFree(const std::string &op) {
  return op == "all_reduce" || op == "identity_all_reduce" || op == "value_split";
}

class GroupNumbering {
public:
  explicit GroupNumbering(JobLayout &job) : job_(job) {}

  void add(std::vector<int> ranks) {
    if (job_.groupId(ranks) < 0)
      job_.groups.push_back({static_cast<int>(job_.groups.size()), std::move(ranks)});
  }

  // Every adapter's groups in every copy (plan devices shifted by c*T).
  Status addAdapters(const ir::Graph &graph) {
    const transform::PartitionedGraph &pg = *job_.partition;
    for (int c = 0; c < job_.dpSize; ++c)
      for (const transform::Adapter &a : pg.adapters)
        for (const transform::CommOp &op : a.ops)
          for (const std::vector<int> &members : op.groups) {
            auto ranks = shifted(members, c);
            if (!std::is_sorted(ranks.begin(), ranks.end())) {
              if (!orderFree(op.op))
                return errorf("error: the {} of tensor '{}' (%{}) runs on plan devices [{}] in "
                              "that member order; nnsc-codegen needs ascending members",
                              op.op, graph.tensor(a.tensor).name, a.tensor,
                              fmt::join(members, ", "));
              std::sort(ranks.begin(), ranks.end());
            }
            add(std::move(ranks));
          }
    return Status::ok();
  }

  // A parameter slice's holders in every copy; a trainable piece without a
  // reducer is only averaged over copies (the plan device's own group).
  void addReducers(const ir::Graph &graph) {
    const transform::PartitionedGraph &pg = *job_.partition;
    std::set<std::pair<int64_t, int>> covered;
    for (const transform::GradReducer &r : pg.reducers) {
      addReducer(reducerRanks(r.devices));
      for (int d : r.devices)
        covered.insert({r.tensor, d});
    }
    for (const ir::Tensor &t : graph.tensors())
      if (t.kind == ir::TensorKind::Param && t.requiresGrad)
        for (int d = 0; d < job_.planNgpus; ++d)
          if (pg.tensors[static_cast<size_t>(t.id)].pieceOn(d) && !covered.count({t.id, d}))
            addReducer(reducerRanks({d}));
  }

  void addReducer(std::vector<int> ranks) {
    if (job_.groupId(ranks) < 0)
      reducerGroups_.push_back(ranks);
    add(std::move(ranks));
  }

  // ZeRO in blocks: every reducer group's shard groups (more than one rank)
  // and cross groups, after every other group (the ids of those stay as
  // without blocks).
  void addZeroSplits() {
    if (job_.zero < 1 || job_.zeroNgroups <= 1)
      return;
    for (const std::vector<int> &ranks : reducerGroups_)
      for (int r : ranks) {
        ZeroSplitRanks split = zeroSplitOf(ranks, job_.worldSize, job_.zeroNgroups, r);
        if (split.shard.size() > 1) {
          add(split.shard);
          add(split.cross);
        }
      }
  }

  // A written buffer piece's holders in every copy, when more than one rank.
  void addBuffers(const ir::Graph &graph) {
    const transform::PartitionedGraph &pg = *job_.partition;
    std::vector<bool> written = ops::writtenBuffers(graph);
    for (const ir::Tensor &t : graph.tensors())
      if (written[static_cast<size_t>(t.id)])
        for (int d = 0; d < job_.planNgpus; ++d)
          if (auto ranks = reducerRanks(bufferHolders(pg, t.id, d)); ranks.size() > 1)
            add(std::move(ranks));
  }

  std::vector<int> shifted(const std::vector<int> &devices, int copy) const {
    std::vector<int> ranks;
    for (int d : devices)
      ranks.push_back(copy * job_.planNgpus + d);
    return ranks;
  }

  std::vector<int> reducerRanks(const std::vector<int> &devices) const {
    std::vector<int> ranks;
    for (int c = 0; c < job_.dpSize; ++c)
      for (int r : shifted(devices, c))
        ranks.push_back(r);
    std::sort(ranks.begin(), ranks.end());
    return ranks;
  }

private:
  JobLayout &job_;
  std::vector<std::vector<int>> reducerGroups_;
};

} // namespace

std::vector<int> bufferHolders(const transform::PartitionedGraph &pg, int64_t tensor, int device) {
  const transform::TensorPlacement &p = pg.tensors[static_cast<size_t>(tensor)];
  const transform::SubTensor *mine = p.pieceOn(device);
  std::vector<int> devices;
  for (size_t i = 0; mine && i < p.pieces.size(); ++i) {
    transform::SubTensor other = p.pieces[i];
    other.tensor = mine->tensor;
    if (other == *mine)
      devices.push_back(p.layout.devices()[i]);
  }
  std::sort(devices.begin(), devices.end());
  return devices;
}

Expected<JobLayout> layoutJob(const ir::Graph &graph, const proto::Plan &plan) {
  JobLayout job;
  job.planNgpus = std::max(1, plan.plan_ngpus());
  job.worldSize = plan.runtime_ngpus();
  job.dpSize = job.worldSize / job.planNgpus;
  job.zero = plan.zero();
  job.zeroNgroups = std::max(1, plan.zero_ngroups());
  job.schedule = plan.schedule();
  job.microBatches = std::max(1, plan.micro_batches());
  if (job.worldSize < 1 || job.worldSize % job.planNgpus != 0)
    return errorf("error: runtime_ngpus {} is not a positive multiple of plan_ngpus {}",
                  plan.runtime_ngpus(), plan.plan_ngpus());
  for (const proto::NodePlan &np : plan.nodes()) {
    job.recomputeOfNode.push_back(np.recompute_group());
    while (np.recompute_group() >= static_cast<int>(job.recomputeGroups.size()))
      job.recomputeGroups.push_back(
          plan::describeRecomputeGroup(graph, plan, static_cast<int>(job.recomputeGroups.size())));
  }
  GroupNumbering numbering(job);
  if (job.planNgpus == 1) {
    numbering.addReducer(numbering.reducerRanks({0})); // group 0: the data-parallel group
    numbering.addZeroSplits();
    return job;
  }
  auto pg = transform::partitionGraph(graph, plan);
  if (!pg)
    return pg.status();
  job.partition = pg.take();
  NNSC_RETURN_IF_ERROR(numbering.addAdapters(graph));
  numbering.addReducers(graph);
  numbering.addBuffers(graph);
  numbering.addZeroSplits();
  return job;
}

} // namespace nnsc::codegen
