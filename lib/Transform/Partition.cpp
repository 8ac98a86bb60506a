// partitionGraph: node parts, tensor placements and adapters (Partition.h);
// reducers and the loss are in PartitionState.cpp.
#include "nnsc/Transform/Partition.h"

#include <algorithm>
#include <map>
#include <set>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "PartitionAdapters.h"
#include "PartitionLayouts.h"
#include "PartitionState.h"
#include "nnsc/Ops/KernelWrites.h"

namespace nnsc::transform {

namespace {

bool isState(const ir::Tensor &t) {
  return t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer ||
         t.kind == ir::TensorKind::Constant;
}

bool isTrainable(const ir::Tensor &t) { return t.kind == ir::TensorKind::Param && t.requiresGrad; }

std::vector<int> devicesOf(const proto::NodePlan &np) {
  return {np.devices().begin(), np.devices().end()};
}

class Partitioner {
public:
  Partitioner(const ir::Graph &graph, const proto::Plan &plan, const PartitionOptions &options)
      : graph_(graph), plan_(plan), options_(options) {}

  Expected<PartitionedGraph> run();

private:
  void readStages();
  Status resolveNodes();
  Status placeTensors();
  Expected<RvdLayout> unionOverStages(int64_t t, const RvdLayout &home);
  RvdLayout moved(const RvdLayout &layout, int from, int to) const;
  Expected<RvdLayout> viewIn(int64_t t, int stage) const;
  void noteTransfer(int64_t t, int stage);
  void countStageCopies();
  Expected<RvdLayout> inputLayout(const ir::Tensor &t) const;
  void markGradients();
  void classifyParamReads();
  bool consumerPartial(const ir::Node &node, size_t input) const;
  Status buildParts();
  Expected<int> adapterFor(const ir::Node &node, size_t input);
  Expected<int> findOrBuildAdapter(int64_t t, const RvdLayout &producer, const RvdLayout &consumer,
                                   const EdgeGrad &grad, int stage);
  Status checkKernelWrites(const ir::Node &node, const std::vector<int> &adapters) const;
  Status buildStateWrites();
  std::string edgeContext(const ir::Node &node, size_t input) const;

  const ir::Graph &graph_;
  const proto::Plan &plan_;
  const PartitionOptions &options_;
  PartitionedGraph pg_;
  std::vector<plan::ResolvedSplit> splits_;
  std::vector<NodeLayouts> layouts_;
  std::vector<bool> needsGrad_;
  std::vector<bool> keepPartial_; // per tensor: a parameter whose reads all leave partial grads
  std::map<std::tuple<int64_t, std::string, bool, int>, int> adapterIndex_;
  // Pipeline stages (Partition.h): per stage its physical stage (stages on
  // the same devices share one), per tensor the stage whose layout it was
  // placed in (-1: a graph input, fed in every stage) and that layout.
  bool pipelined_ = false;
  std::vector<int> physical_;
  std::vector<int> homeStage_;
  std::vector<RvdLayout> homeLayout_;
  std::map<std::pair<int64_t, int>, size_t> transferIndex_;
};

Expected<PartitionedGraph> Partitioner::run() {
  pg_.numDevices = plan_.plan_ngpus();
  readStages();
  NNSC_RETURN_IF_ERROR(resolveNodes());
  NNSC_RETURN_IF_ERROR(placeTensors());
  markGradients();
  classifyParamReads();
  NNSC_RETURN_IF_ERROR(buildParts());
  NNSC_RETURN_IF_ERROR(buildStateWrites());
  pg_.reducers = gradReducers(graph_, pg_, keepPartial_);
  countStageCopies();
  pg_.loss = lossInfo(graph_, pg_, splits_);
  return std::move(pg_);
}

void Partitioner::readStages() {
  std::map<int, std::vector<int>> byId;
  for (const proto::Stage &st : plan_.stages())
    byId[st.id()] = {st.devices().begin(), st.devices().end()};
  pipelined_ = byId.size() > 1;
  if (!pipelined_) {
    std::vector<int> all;
    for (int d = 0; d < plan_.plan_ngpus(); ++d)
      all.push_back(d);
    pg_.stageDevices = {all};
    physical_ = {0};
    pg_.stageOfNode.assign(graph_.nodes().size(), 0);
    return;
  }
  std::vector<std::vector<int>> sets;
  for (const auto &[id, devices] : byId) { // validatePlan: ids 0..n-1
    pg_.stageDevices.push_back(devices);
    std::vector<int> set = devices;
    std::sort(set.begin(), set.end());
    auto it = std::find(sets.begin(), sets.end(), set);
    physical_.push_back(static_cast<int>(it - sets.begin()));
    if (it == sets.end())
      sets.push_back(set);
  }
  for (const proto::NodePlan &np : plan_.nodes())
    pg_.stageOfNode.push_back(np.stage());
}

// `layout` (over stage `from`'s devices) on stage `to`'s devices, position
// for position.
RvdLayout Partitioner::moved(const RvdLayout &layout, int from, int to) const {
  const std::vector<int> &a = pg_.stageDevices[static_cast<size_t>(from)];
  const std::vector<int> &b = pg_.stageDevices[static_cast<size_t>(to)];
  std::vector<int> devices;
  for (int d : layout.devices())
    devices.push_back(b[static_cast<size_t>(std::find(a.begin(), a.end(), d) - a.begin())]);
  auto out = RvdLayout::fromCounts(layout.shape(), layout.counts(), devices);
  return out->withBlocks(layout.blocks()).take(); // same counts and blocks: valid
}

// How a reader in `stage` finds `t` before its adapter.
Expected<RvdLayout> Partitioner::viewIn(int64_t t, int stage) const {
  if (!pipelined_)
    return pg_.tensors[static_cast<size_t>(t)].layout;
  const ir::Tensor &tensor = graph_.tensor(t);
  if (tensor.kind == ir::TensorKind::Input) {
    const std::vector<int> &devices = pg_.stageDevices[static_cast<size_t>(stage)];
    for (const proto::InputPlan &in : plan_.inputs())
      if (in.tensor() == t && in.num() > 1)
        return splitLayout(tensor.shape, in.dim(),
                           {devices.begin(), devices.begin() + std::min<size_t>(
                                                                   devices.size(), in.num())});
    return replicatedLayout(tensor.shape, devices);
  }
  int home = homeStage_[static_cast<size_t>(t)];
  const RvdLayout &layout = homeLayout_[static_cast<size_t>(t)];
  if (home < 0 || physical_[static_cast<size_t>(home)] == physical_[static_cast<size_t>(stage)])
    return layout;
  return moved(layout, home, stage);
}

// One placement for state read in several physical stages: the home layout
// replicated once per stage (R outermost, so replica k sits on the k-th
// stage's devices in the home layout's positions).
Expected<RvdLayout> Partitioner::unionOverStages(int64_t t, const RvdLayout &home) {
  int homeStage = homeStage_[static_cast<size_t>(t)];
  std::vector<int> stages{homeStage};
  for (const ir::Node &node : graph_.nodes()) {
    int st = pg_.stageOfNode[static_cast<size_t>(node.id)];
    bool reads = std::find(node.inputs.begin(), node.inputs.end(), t) != node.inputs.end();
    bool seen = std::any_of(stages.begin(), stages.end(), [&](int o) {
      return physical_[static_cast<size_t>(o)] == physical_[static_cast<size_t>(st)];
    });
    if (reads && !seen)
      stages.push_back(st);
  }
  if (stages.size() == 1)
    return home;
  std::vector<int> devices;
  for (int st : stages) {
    RvdLayout copy = moved(home, homeStage, st);
    devices.insert(devices.end(), copy.devices().begin(), copy.devices().end());
  }
  std::vector<int64_t> counts = home.counts();
  counts[kAxisR] *= static_cast<int64_t>(stages.size());
  auto layout = RvdLayout::fromCounts(home.shape(), counts, devices);
  if (!layout)
    return layout.status();
  return layout->withBlocks(home.blocks());
}

void Partitioner::noteTransfer(int64_t t, int stage) {
  int home = homeStage_[static_cast<size_t>(t)];
  if (!pipelined_ || home < 0 || home == stage ||
      graph_.tensor(t).kind != ir::TensorKind::Activation ||
      transferIndex_.count({t, stage}))
    return;
  transferIndex_[{t, stage}] = pg_.transfers.size();
  const RvdLayout &source = homeLayout_[static_cast<size_t>(t)];
  pg_.transfers.push_back({t, home, stage, source, *viewIn(t, stage),
                           bool(needsGrad_[static_cast<size_t>(t)])});
}

// A shard held in several physical stages sums its copies' gradients.
void Partitioner::countStageCopies() {
  if (!pipelined_)
    return;
  std::map<int, int> physicalOfDevice;
  for (size_t st = 0; st < pg_.stageDevices.size(); ++st)
    for (int d : pg_.stageDevices[st])
      physicalOfDevice[d] = physical_[st];
  for (GradReducer &r : pg_.reducers) {
    std::set<int> stages;
    for (int d : r.devices)
      stages.insert(physicalOfDevice[d]);
    r.stageCopies = static_cast<int>(stages.size());
  }
}

Status Partitioner::resolveNodes() {
  int64_t lossNode = lossNodeOf(graph_);
  for (const ir::Node &node : graph_.nodes()) {
    const proto::NodePlan &np = plan_.nodes(static_cast<int>(node.id));
    auto split = plan::resolveSplit(graph_, node, np);
    if (!split) // e.g. a plan.pb written by hand or by an older nnsc-plan
      return errorf("error: the plan does not fit {}: {}", plan::describeNode(node),
                    split.status().message());

    auto layouts = nodeLayouts(graph_, node, *split, devicesOf(np), node.id == lossNode);
    if (!layouts)
      return layouts.status().withContext(plan::describeNode(node));
    splits_.push_back(split.take());
    layouts_.push_back(layouts.take());
  }
  return Status::ok();
}

Expected<RvdLayout> Partitioner::inputLayout(const ir::Tensor &t) const {
  for (const proto::InputPlan &in : plan_.inputs())
    if (in.tensor() == t.id && in.num() > 1) {
      // Part i on device i of every physical stage (R outermost: stage k's
      // copy is replica k).
      std::vector<int> devices;
      int stages = 0;
      for (size_t st = 0; st < pg_.stageDevices.size(); ++st) {
        if (physical_[st] != stages)
          continue;
        ++stages;
        for (int d = 0; d < in.num(); ++d)
          devices.push_back(pg_.stageDevices[st][static_cast<size_t>(d)]);
      }
      std::vector<int64_t> counts(t.shape.size() + 2, 1);
      counts[kAxisR] = stages;
      counts[static_cast<size_t>(axisOfDim(in.dim()))] = in.num();
      return RvdLayout::fromCounts(t.shape, counts, devices);
    }
  std::vector<int> all;
  for (int d = 0; d < plan_.plan_ngpus(); ++d)
    all.push_back(d);
  return replicatedLayout(t.shape, all);
}

// Activations live where their producer writes them, graph inputs as fed,
// state as its first reader wants it (unread state on device 0) but never as
// partial sums (an addend is stored whole, value-split by its adapter); a
// buffer that a kernel updates in place as the first such kernel wants it, so
// that the kernel writes the stored piece itself.
Status Partitioner::placeTensors() {
  std::vector<std::optional<RvdLayout>> layout(graph_.tensors().size());
  homeStage_.assign(graph_.tensors().size(), -1);
  auto stageOf = [&](const ir::Node &node) { return pg_.stageOfNode[static_cast<size_t>(node.id)]; };
  for (const ir::Node &node : graph_.nodes())
    for (int i : ops::kernelWrittenInputs(node)) {
      int64_t t = node.inputs[static_cast<size_t>(i)];
      auto &slot = layout[static_cast<size_t>(t)];
      if (!slot) {
        slot = layouts_[static_cast<size_t>(node.id)].inputs[static_cast<size_t>(i)];
        homeStage_[static_cast<size_t>(t)] = stageOf(node);
      }
    }
  for (const ir::Node &node : graph_.nodes()) {
    const NodeLayouts &l = layouts_[static_cast<size_t>(node.id)];
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      layout[static_cast<size_t>(node.outputs[o])] = l.outputs[o];
      homeStage_[static_cast<size_t>(node.outputs[o])] = stageOf(node);
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      auto &slot = layout[static_cast<size_t>(node.inputs[i])];
      if (slot || !isState(graph_.tensor(node.inputs[i])))
        continue;
      auto stored = withoutPartials(l.inputs[i]);
      if (!stored)
        return stored.status().withContext(plan::describeNode(node));
      slot = stored.take();
      homeStage_[static_cast<size_t>(node.inputs[i])] = stageOf(node);
    }
  }
  for (const ir::Tensor &t : graph_.tensors()) {
    auto &slot = layout[static_cast<size_t>(t.id)];
    if (!slot) {
      auto l = t.kind == ir::TensorKind::Input ? inputLayout(t) : replicatedLayout(t.shape, {0});
      if (!l)
        return l.status().withContext(fmt::format("tensor %{} '{}'", t.id, t.name));
      slot = l.take();
      if (t.kind != ir::TensorKind::Input)
        homeStage_[static_cast<size_t>(t.id)] = 0;
    }
    homeLayout_.push_back(*slot);
    if (pipelined_ && isState(t)) {
      auto all = unionOverStages(t.id, *slot);
      if (!all)
        return all.status().withContext(fmt::format("tensor %{} '{}'", t.id, t.name));
      slot = all.take();
    }
    TensorPlacement p{t.id, *slot, {}};
    for (int i = 0; i < slot->numDevices(); ++i)
      p.pieces.push_back(pieceOf(*slot, t.id, i));
    pg_.tensors.push_back(std::move(p));
  }
  return Status::ok();
}

void Partitioner::markGradients() {
  needsGrad_.assign(graph_.tensors().size(), false);
  for (const ir::Tensor &t : graph_.tensors())
    needsGrad_[static_cast<size_t>(t.id)] = isTrainable(t);
  for (const ir::Node &node : graph_.nodes()) {
    bool any = false;
    for (int64_t in : node.inputs)
      any = any || needsGrad_[static_cast<size_t>(in)];
    for (int64_t out : node.outputs)
      needsGrad_[static_cast<size_t>(out)] = any && ir::isFloatingPoint(graph_.tensor(out).dtype);
  }
}

// A split node reading an input whole leaves each part a partial gradient of
// it. Not so an addend read as value chunks: each chunk's gradient is the
// whole gradient of the partial-sum outputs, which the value_split adapter
// passes back unchanged (RvdAutograd.h).
bool Partitioner::consumerPartial(const ir::Node &node, size_t input) const {
  const plan::ResolvedSplit &s = splits_[static_cast<size_t>(node.id)];
  return s.num > 1 && s.effect.inputDims[input] < 0 && !s.effect.valueInput(input);
}

// A parameter keeps partial gradients (summed by its reducer) only when every
// read of it is direct and partial; one read with whole gradients makes all
// its partial reads sum theirs in backward instead.
void Partitioner::classifyParamReads() {
  std::vector<int> partial(graph_.tensors().size()), whole(graph_.tensors().size());
  for (const ir::Node &node : graph_.nodes())
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ir::Tensor &t = graph_.tensor(node.inputs[i]);
      if (!isTrainable(t))
        continue;
      auto stored = viewIn(t.id, pg_.stageOfNode[static_cast<size_t>(node.id)]);
      bool direct = stored && stored->equivalent(layouts_[static_cast<size_t>(node.id)].inputs[i]);
      ++(direct && consumerPartial(node, i) ? partial : whole)[static_cast<size_t>(t.id)];
    }
  keepPartial_.assign(graph_.tensors().size(), false);
  for (size_t t = 0; t < partial.size(); ++t)
    keepPartial_[t] = partial[t] > 0 && whole[t] == 0;
}

Status Partitioner::buildParts() {
  pg_.parts.resize(graph_.nodes().size());
  for (const ir::Node &node : graph_.nodes()) {
    const NodeLayouts &l = layouts_[static_cast<size_t>(node.id)];
    std::vector<int> adapters;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      auto a = adapterFor(node, i);
      if (!a)
        return a.status();
      adapters.push_back(*a);
    }
    NNSC_RETURN_IF_ERROR(checkKernelWrites(node, adapters));
    std::vector<int> devices = devicesOf(plan_.nodes(static_cast<int>(node.id)));
    for (size_t p = 0; p < devices.size(); ++p) {
      NodePart part{node.id, static_cast<int>(p), devices[p], {}, adapters, {}};
      for (size_t i = 0; i < node.inputs.size(); ++i)
        part.inputs.push_back(pieceOf(l.inputs[i], node.inputs[i], static_cast<int>(p)));
      for (size_t o = 0; o < node.outputs.size(); ++o)
        part.outputs.push_back(pieceOf(l.outputs[o], node.outputs[o], static_cast<int>(p)));
      pg_.parts[static_cast<size_t>(node.id)].push_back(std::move(part));
    }
  }
  return Status::ok();
}

std::string Partitioner::edgeContext(const ir::Node &node, size_t input) const {
  const ir::Tensor &t = graph_.tensor(node.inputs[input]);
  return fmt::format("tensor %{}{} read by {} (input {})", t.id,
                     t.name.empty() ? "" : " '" + t.name + "'", plan::describeNode(node), input);
}

// The adapter feeding input `input` of `node`, shared with earlier readers
// of the same tensor that want the same layout; -1 when none is needed.
Expected<int> Partitioner::adapterFor(const ir::Node &node, size_t input) {
  int64_t t = node.inputs[input];
  int stage = pg_.stageOfNode[static_cast<size_t>(node.id)];
  auto producer = viewIn(t, stage);
  if (!producer)
    return producer.status().withContext(edgeContext(node, input));
  const RvdLayout &consumer = layouts_[static_cast<size_t>(node.id)].inputs[input];
  if (producer->deviceSet() != consumer.deviceSet())
    return errorf("{}: it lives on devices [{}] but the reader runs on [{}]; a tensor changes "
                  "devices only between pipeline stages (give the nodes different stages)",
                  edgeContext(node, input), fmt::join(producer->deviceSet(), ", "),
                  fmt::join(consumer.deviceSet(), ", "));
  noteTransfer(t, stage);
  EdgeGrad grad{needsGrad_[static_cast<size_t>(t)], consumerPartial(node, input),
                keepPartial_[static_cast<size_t>(t)]};
  auto index = findOrBuildAdapter(t, *producer, consumer, grad, stage);
  if (!index)
    return index.status().withContext(edgeContext(node, input));
  if (*index >= 0)
    pg_.adapters[static_cast<size_t>(*index)].readers.emplace_back(node.id, input);
  return index;
}

// The adapter turning `t` from its placement into `consumer`: one built
// earlier for the same layout and gradient kind, or a new one; -1 when
// nothing needs to run. Readers are the caller's to add.
Expected<int> Partitioner::findOrBuildAdapter(int64_t t, const RvdLayout &producer,
                                              const RvdLayout &consumer, const EdgeGrad &grad,
                                              int stage) {
  // Per stage: stages on the same devices run in functions of their own.
  auto key =
      std::make_tuple(t, consumer.canonical().strWithDevices(), grad.consumerPartial, stage);
  if (auto it = adapterIndex_.find(key); it != adapterIndex_.end())
    return it->second;
  RvdSearchOptions search = options_.search;
  search.elementBytes = ir::dtypeSize(graph_.tensor(t).dtype);
  auto adapter = buildAdapter(t, producer, consumer, grad, search);
  if (!adapter)
    return adapter.status();
  adapter->stage = stage;
  int index = -1;
  if (!adapter->ops.empty()) {
    index = static_cast<int>(pg_.adapters.size());
    pg_.adapters.push_back(adapter.take());
  }
  adapterIndex_[key] = index;
  return index;
}

// A kernel that updates a buffer in place must receive the stored piece; an
// adapter would hand it a temporary and the update would be lost.
Status Partitioner::checkKernelWrites(const ir::Node &node,
                                      const std::vector<int> &adapters) const {
  for (int i : ops::kernelWrittenInputs(node)) {
    if (adapters[static_cast<size_t>(i)] < 0)
      continue;
    int64_t t = node.inputs[static_cast<size_t>(i)];
    return errorf(
        "error: {} updates buffer '{}' (%{}) in place, but the plan stores it as {} "
        "and the node reads it as {}; the update would go to a temporary copy; give "
        "every node that updates this buffer the same split",
        plan::describeNode(node), graph_.tensor(t).name, t,
        pg_.tensors[static_cast<size_t>(t)].layout.strWithDevices(),
        layouts_[static_cast<size_t>(node.id)].inputs[static_cast<size_t>(i)].strWithDevices());
  }
  return Status::ok();
}

// Each state update's value, moved (without gradient) into its buffer's
// stored layout on the devices that hold the buffer.
Status Partitioner::buildStateWrites() {
  for (const ir::StateUpdate &u : graph_.stateUpdates) {
    const ir::Tensor &state = graph_.tensor(u.state);
    const RvdLayout &stored = pg_.tensors[static_cast<size_t>(u.state)].layout;
    const RvdLayout &value = pg_.tensors[static_cast<size_t>(u.value)].layout;
    std::string context =
        fmt::format("the update of buffer '{}' (%{}) from %{}", state.name, u.state, u.value);
    if (state.kind != ir::TensorKind::Buffer)
      return errorf("error: {}: %{} is not a buffer", context, u.state);
    if (value.deviceSet() != stored.deviceSet())
      return errorf("error: {}: the value lives on devices [{}] but the buffer on [{}]; moving "
                    "tensors between device sets (pipeline stages) is not supported yet",
                    context, fmt::join(value.deviceSet(), ", "),
                    fmt::join(stored.deviceSet(), ", "));
    if (pipelined_ && (stored.deviceSet() != homeLayout_[static_cast<size_t>(u.state)].deviceSet() ||
                       homeStage_[static_cast<size_t>(u.value)] != homeStage_[static_cast<size_t>(u.state)]))
      return errorf("error: {}: the buffer is read or updated in several pipeline stages; "
                    "nnsc keeps such buffers in one stage only",
                    context);
    auto index = findOrBuildAdapter(u.value, value, stored, EdgeGrad{},
                                    std::max(0, homeStage_[static_cast<size_t>(u.value)]));
    if (!index)
      return index.status().withContext(context);
    pg_.stateWrites.push_back({u.state, u.value, *index});
  }
  return Status::ok();
}

} // namespace

Expected<PartitionedGraph> partitionGraph(const ir::Graph &graph, const proto::Plan &plan,
                                          const PartitionOptions &options) {
  return Partitioner(graph, plan, options).run();
}

} // namespace nnsc::transform
