// Rank layouts: the shared pieces and the whole-plan path (plan_ngpus 1:
// every node whole on the one plan device, data-parallel copies averaging
// their gradients over group 0).
#include "nnsc/CodeGen/RankLayout.h"

#include <algorithm>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "LayoutParts.h"
#include "Literals.h"
#include "nnsc/Ops/KernelWrites.h"

namespace nnsc::codegen {

ir::Shape ShardSpec::shape() const {
  ir::Shape s;
  for (size_t d = 0; d < start.size(); ++d)
    s.push_back((stop[d] - start[d]) * (d < blocks.size() ? blocks[d] : 1));
  return s;
}

bool InputSpec::isWhole() const {
  return stop == shape && std::all_of(start.begin(), start.end(), [](int64_t v) { return v == 0; });
}

int JobLayout::groupId(const std::vector<int> &ranks) const {
  for (const CommGroupSpec &g : groups)
    if (g.ranks == ranks)
      return g.id;
  return -1;
}

namespace {

// Names the program itself uses; an input may not take them.
bool isReservedName(const std::string &name) {
  static const std::set<std::string> names = {"torch",  "nnsc",  "device", "Tensor",
                                              "Device", "Tuple", "List",   "float",
                                              "int",    "bool",  "str",    "annotate"};
  static const std::regex generated("(rc|[ptcra])[0-9]+(_[0-9]+)?");
  return names.count(name) || std::regex_match(name, generated);
}

} // namespace

ShardSpec wholeShard(const ir::Tensor &t, std::string localName, bool constant) {
  ShardSpec s;
  s.tensor = t.id;
  s.localName = std::move(localName);
  s.constant = constant;
  s.start.assign(t.shape.size(), 0);
  s.stop = t.shape;
  return s;
}

std::vector<InputSpec> wholeInputs(const ir::Graph &graph) {
  std::vector<InputSpec> inputs;
  std::set<std::string> used;
  for (int64_t id : graph.inputs) {
    const ir::Tensor &t = graph.tensor(id);
    std::string name = pyIdentifier(t.name);
    while (isReservedName(name) || used.count(name))
      name += "_";
    used.insert(name);
    InputSpec in{id, name, t.shape, t.shape.empty() ? -1 : 0, {}, {}};
    in.start.assign(t.shape.size(), 0);
    in.stop = t.shape;
    inputs.push_back(std::move(in));
  }
  return inputs;
}

std::vector<int64_t> constantsWithDims(const ir::Graph &graph, const std::vector<int64_t> &nodes) {
  std::set<int64_t> constants;
  auto note = [&](int64_t id) {
    if (graph.tensor(id).kind == ir::TensorKind::Constant && !graph.tensor(id).shape.empty())
      constants.insert(id);
  };
  for (int64_t n : nodes)
    for (int64_t in : graph.nodes()[static_cast<size_t>(n)].inputs)
      note(in);
  for (int64_t out : graph.outputs)
    note(out);
  return {constants.begin(), constants.end()};
}

void placeRank(const JobLayout &job, int rank, RankLayout &layout) {
  layout.rank = rank;
  layout.worldSize = job.worldSize;
  layout.planNgpus = job.planNgpus;
  layout.planDevice = rank % job.planNgpus;
  layout.dpSize = job.dpSize;
  layout.dpRank = rank / job.planNgpus;
  layout.zero = job.zero;
  layout.zeroNgroups = job.zeroNgroups;
}

ZeroSplitRanks zeroSplitOf(const std::vector<int> &ranks, int worldSize, int ngroups, int rank) {
  const int block = worldSize / ngroups;
  std::vector<std::vector<int>> byBlock(static_cast<size_t>(ngroups));
  for (int r : ranks)
    byBlock[static_cast<size_t>(r / block)].push_back(r);
  ZeroSplitRanks out;
  const std::vector<int> &mine = byBlock[static_cast<size_t>(rank / block)];
  auto place = std::find(mine.begin(), mine.end(), rank);
  if (place == mine.end())
    return out;
  for (const std::vector<int> &b : byBlock)
    if (b.size() != mine.size())
      return out;
  out.shard = mine;
  for (const std::vector<int> &b : byBlock)
    out.cross.push_back(b[static_cast<size_t>(place - mine.begin())]);
  return out;
}

std::vector<CommGroupSpec> groupsOfRank(const JobLayout &job, int rank) {
  std::vector<CommGroupSpec> mine;
  for (const CommGroupSpec &g : job.groups)
    if (std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end())
      mine.push_back(g);
  return mine;
}

int recomputeGroupOf(const JobLayout &job, int64_t node) {
  auto i = static_cast<size_t>(node);
  return i < job.recomputeOfNode.size() ? job.recomputeOfNode[i] : -1;
}

void addBufferSync(RankLayout &layout, int group, const std::string &shard) {
  auto &syncs = layout.bufferSyncs;
  auto it = std::find_if(syncs.begin(), syncs.end(),
                         [&](const BufferSyncSpec &b) { return b.group >= group; });
  if (it == syncs.end() || it->group != group)
    it = syncs.insert(it, BufferSyncSpec{group, {}});
  it->shards.push_back(shard);
}

namespace {

void addWholeShards(const ir::Graph &graph, RankLayout &layout) {
  for (const ir::Tensor &t : graph.tensors())
    if (t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer)
      layout.shards.push_back(wholeShard(t, fmt::format("p{}", layout.shards.size()), false));
  for (int64_t c : constantsWithDims(graph, layout.nodes))
    layout.shards.push_back(wholeShard(graph.tensor(c), fmt::format("c{}", c), true));
}

// Every trainable shard averaged over group 0, the data-parallel group.
void addWholeReducer(const ir::Graph &graph, RankLayout &layout) {
  ReducerSpec r;
  r.group = 0;
  for (const ShardSpec &s : layout.shards) {
    const ir::Tensor &t = graph.tensor(s.tensor);
    if (!s.constant && t.kind == ir::TensorKind::Param && t.requiresGrad)
      r.shards.push_back(s.localName);
  }
  if (!r.shards.empty())
    layout.reducers.push_back(std::move(r));
}

RankLayout layoutWholeRank(const ir::Graph &graph, const JobLayout &job, int rank) {
  RankLayout layout;
  placeRank(job, rank, layout);
  for (const ir::Node &node : graph.nodes()) {
    layout.nodes.push_back(node.id);
    RankStep step;
    step.node = node.id;
    step.args = node.args;
    step.inputAdapters.assign(node.inputs.size(), -1);
    step.recomputeGroup = recomputeGroupOf(job, node.id);
    layout.steps.push_back(std::move(step));
  }
  for (const ir::StateUpdate &u : graph.stateUpdates) {
    RankStep step;
    step.kind = RankStep::StateWrite;
    step.tensor = u.state;
    step.value = u.value;
    layout.steps.push_back(std::move(step));
  }
  addWholeShards(graph, layout);
  layout.inputs = wholeInputs(graph);
  layout.outputs = graph.outputs;
  layout.lossOutput = graph.lossOutput;
  layout.groups = groupsOfRank(job, rank);
  layout.recomputeGroups = job.recomputeGroups;
  addWholeReducer(graph, layout);
  std::vector<bool> written = ops::writtenBuffers(graph);
  if (job.dpSize > 1) // every copy holds every buffer whole
    for (const ShardSpec &s : layout.shards)
      if (!s.constant && written[static_cast<size_t>(s.tensor)])
        addBufferSync(layout, 0, s.localName);
  return layout;
}

} // namespace

namespace {

// ZeRO in blocks: each reducer's shard and cross groups (layoutJob numbered
// them).
Status splitReducers(const JobLayout &job, RankLayout &layout) {
  if (job.zero < 1 || job.zeroNgroups <= 1)
    return Status::ok();
  for (ReducerSpec &spec : layout.reducers) {
    const std::vector<int> &ranks = job.groups[static_cast<size_t>(spec.group)].ranks;
    ZeroSplitRanks split = zeroSplitOf(ranks, job.worldSize, job.zeroNgroups, layout.rank);
    if (split.shard.empty())
      return Status::internal(fmt::format("error: group {} of ranks [{}] does not split evenly "
                                          "into zero_ngroups {} blocks",
                                          spec.group, fmt::join(ranks, ", "), job.zeroNgroups));
    spec.zeroSplit = true;
    if (split.shard.size() > 1) {
      spec.zeroShardGroup = job.groupId(split.shard);
      spec.zeroCrossGroup = job.groupId(split.cross);
      if (spec.zeroShardGroup < 0 || spec.zeroCrossGroup < 0)
        return Status::internal(fmt::format("error: no ZeRO block groups [{}] and [{}] for rank {}",
                                            fmt::join(split.shard, ", "),
                                            fmt::join(split.cross, ", "), layout.rank));
    }
  }
  return Status::ok();
}

} // namespace

Expected<RankLayout> layoutRank(const ir::Graph &graph, const JobLayout &job, int rank) {
  if (rank < 0 || rank >= job.worldSize)
    return errorf("error: rank {} is outside 0..{}", rank, job.worldSize - 1);
  auto layout = job.partition ? layoutPartitionedRank(graph, job, rank)
                              : Expected<RankLayout>(layoutWholeRank(graph, job, rank));
  if (layout)
    NNSC_RETURN_IF_ERROR(splitReducers(job, *layout));
  return layout;
}

Expected<RankLayout> layoutRank(const ir::Graph &graph, const proto::Plan &plan, int rank) {
  auto job = layoutJob(graph, plan);
  if (!job)
    return job.status();
  return layoutRank(graph, *job, rank);
}

} // namespace nnsc::codegen
