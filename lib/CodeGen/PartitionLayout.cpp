// Rank layouts of plans that span several devices: the partition pass's
// program for the rank's plan device, with its local sub-tensors, adapters,
// parameter slices, gradient reducers and loss share, shifted to the rank's
// data-parallel copy.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "LayoutParts.h"
#include "nnsc/Ops/KernelWrites.h"
#include "nnsc/Ops/Randomness.h"
#include "nnsc/Plan/PipelineSchedule.h"

namespace nnsc::codegen {

namespace {

using transform::CommOp;
using transform::PartitionedGraph;
using transform::SubTensor;

bool samePiece(const SubTensor &a, const SubTensor &b) {
  SubTensor other = b;
  other.tensor = a.tensor;
  return a == other;
}

ShardSpec pieceShard(const SubTensor &piece, const transform::TensorPlacement &placement,
                     std::string localName, bool constant) {
  ShardSpec s;
  s.tensor = piece.tensor;
  s.localName = std::move(localName);
  s.constant = constant;
  s.start = piece.start;
  s.stop = piece.stop;
  if (piece.interleaved())
    s.blocks = piece.blocks;
  s.valueIndex = piece.valueIndex;
  s.valueChunks = piece.valueChunks;
  s.replicas = 0;
  for (const SubTensor &other : placement.pieces)
    s.replicas += samePiece(other, piece) ? 1 : 0;
  return s;
}

class RankBuilder {
public:
  RankBuilder(const ir::Graph &graph, const JobLayout &job, int rank)
      : graph_(graph), job_(job), pg_(*job.partition) {
    placeRank(job, rank, layout_);
    device_ = layout_.planDevice;
  }

  Expected<RankLayout> build() {
    for (const transform::ProgramStep &step : transform::deviceProgram(pg_, device_)) {
      if (step.kind == transform::ProgramStep::WriteState) {
        addStateWrite(pg_.stateWrites[static_cast<size_t>(step.index)]);
        continue;
      }
      Status st = step.kind == transform::ProgramStep::RunNode ? addNode(step.index)
                                                               : addAdapter(step.index);
      NNSC_RETURN_IF_ERROR(st);
    }
    addShards();
    NNSC_RETURN_IF_ERROR(addInputs());
    layout_.outputs = graph_.outputs;
    layout_.lossOutput = graph_.lossOutput;
    addLoss();
    layout_.groups = groupsOfRank(job_, layout_.rank);
    layout_.recomputeGroups = job_.recomputeGroups;
    NNSC_RETURN_IF_ERROR(addReducers());
    NNSC_RETURN_IF_ERROR(addBufferSyncs());
    if (pg_.stageDevices.size() > 1)
      NNSC_RETURN_IF_ERROR(addChunks());
    return std::move(layout_);
  }

private:
  Status addNode(int64_t id) {
    const transform::NodePart *part = pg_.partOn(id, device_);
    if (!part)
      return Status::internal(
          fmt::format("error: the partition has no part of node {} on device {}", id, device_));
    auto args = transform::localArgs(graph_, *part);
    if (!args)
      return args.status();
    RankStep step;
    step.node = id;
    step.args = args.take();
    step.inputAdapters = part->inputAdapters;
    step.rngPiece = randomPiece(*part);
    step.recomputeGroup = recomputeGroupOf(job_, id);
    step.stage = pg_.stageOfNode[static_cast<size_t>(id)];
    layout_.nodes.push_back(id);
    layout_.steps.push_back(std::move(step));
    return Status::ok();
  }

  // The ordinal of `part`'s output piece among the distinct output pieces of
  // its node (in part order) when the node draws random values and is split;
  // -1 otherwise.
  int randomPiece(const transform::NodePart &part) const {
    const ir::Node &node = graph_.nodes()[static_cast<size_t>(part.node)];
    if (!ops::drawsRandomValues(node) || part.outputs.empty())
      return -1;
    std::vector<transform::SubTensor> pieces;
    for (const transform::NodePart &p : pg_.parts[static_cast<size_t>(part.node)])
      if (!p.outputs.empty() &&
          std::find(pieces.begin(), pieces.end(), p.outputs[0]) == pieces.end())
        pieces.push_back(p.outputs[0]);
    if (pieces.size() < 2)
      return -1;
    return int(std::find(pieces.begin(), pieces.end(), part.outputs[0]) - pieces.begin());
  }

  void addStateWrite(const transform::StateWrite &w) {
    RankStep step;
    step.kind = RankStep::StateWrite;
    step.tensor = w.state;
    step.value = w.value;
    step.adapter = w.adapter;
    for (const ir::Node &node : graph_.nodes()) // the stage computing the value
      if (std::find(node.outputs.begin(), node.outputs.end(), w.value) != node.outputs.end())
        step.stage = pg_.stageOfNode[static_cast<size_t>(node.id)];
    layout_.steps.push_back(std::move(step));
  }

  Status addAdapter(int index) {
    const transform::Adapter &a = pg_.adapters[static_cast<size_t>(index)];
    const ir::Tensor &t = graph_.tensor(a.tensor);
    RankStep step;
    step.kind = RankStep::Adapter;
    step.adapter = index;
    step.tensor = a.tensor;
    step.stage = a.stage;
    step.description =
        fmt::format("%{} {}{}: {} -> {}", t.id, ir::dtypeName(t.dtype), ir::shapeString(t.shape),
                    a.producer.strWithDevices(), a.consumer.strWithDevices());
    for (const CommOp &op : a.ops) {
      auto call = commCall(op, a);
      if (!call)
        return call.status();
      step.calls.push_back(call.take());
    }
    layout_.steps.push_back(std::move(step));
    return Status::ok();
  }

  Expected<CommCall> commCall(const CommOp &op, const transform::Adapter &a) const {
    if (op.op == "reshape") { // a local view in or out of interleaved blocks
      CommCall call;
      call.op = op.op;
      call.shape = op.outShape;
      call.move = "local view";
      return call;
    }
    const std::vector<int> *members = op.groupOf(device_);
    if (!members)
      return Status::internal(fmt::format("error: the {} of %{} has no group holding plan "
                                          "device {}",
                                          op.op, a.tensor, device_));
    CommCall call;
    call.op = op.op;
    for (int d : *members)
      call.ranks.push_back(layout_.dpRank * layout_.planNgpus + d);
    std::sort(call.ranks.begin(), call.ranks.end()); // layoutJob checked the order
    call.group = job_.groupId(call.ranks);
    auto names = argumentNames(op);
    if (!names)
      return names.status();
    for (size_t i = 0; i < names->size(); ++i)
      call.args.emplace_back((*names)[i], op.args[i]);
    call.move = moveText(op, members->size());
    return call;
  }

  static Expected<std::vector<std::string>> argumentNames(const CommOp &op) {
    std::vector<std::string> names;
    if (op.op == "all_gather" || op.op == "all_gather_split" || op.op == "reduce_scatter" ||
        op.op == "split")
      names = {"dim"};
    else if (op.op == "all_to_all")
      names = {"split_dim", "concat_dim"};
    else if (op.op != "all_reduce" && op.op != "identity_all_reduce" && op.op != "value_split")
      return errorf("error: nnsc-codegen does not know the communication op '{}'", op.op);
    if (names.size() != op.args.size())
      return Status::internal(fmt::format("error: nnsc.{} takes {} integer arguments, the "
                                          "partition gave {}",
                                          op.op, names.size(), op.args.size()));
    return names;
  }

  // "V->R x2", "D2->R x2, backward reduce_scatter", ...
  static std::string moveText(const CommOp &op, size_t size) {
    auto arg = [&](size_t i) { return i < op.args.size() ? op.args[i] : -1; };
    std::string move;
    switch (op.forward) {
    case transform::Primitive::AllReduce:
      move = "V->R";
      break;
    case transform::Primitive::AllGather:
      move = fmt::format("D{}->R", arg(0));
      break;
    case transform::Primitive::ReduceScatter:
      move = fmt::format("V->D{}", arg(0));
      break;
    case transform::Primitive::AllToAll:
      move = fmt::format("D{}->D{}", arg(1), arg(0));
      break;
    case transform::Primitive::Chunk:
      move = fmt::format("R->D{}", arg(0));
      break;
    case transform::Primitive::ValueSplit:
      move = "R->V";
      break;
    default:
      move = "R";
    }
    move += fmt::format(" x{}", size);
    if (op.backward != transform::Primitive::Identity)
      move += fmt::format(", backward {}", transform::primitiveName(op.backward));
    return move;
  }

  void addShards() {
    for (const ir::Tensor &t : graph_.tensors()) {
      if (t.kind != ir::TensorKind::Param && t.kind != ir::TensorKind::Buffer)
        continue;
      const auto &placement = pg_.tensors[static_cast<size_t>(t.id)];
      if (const SubTensor *piece = placement.pieceOn(device_))
        layout_.shards.push_back(
            pieceShard(*piece, placement, fmt::format("p{}", layout_.shards.size()), false));
    }
    for (int64_t c : constantsWithDims(graph_, layout_.nodes)) {
      const auto &placement = pg_.tensors[static_cast<size_t>(c)];
      const SubTensor *piece = placement.pieceOn(device_);
      layout_.shards.push_back(piece ? pieceShard(*piece, placement, fmt::format("c{}", c), true)
                                     : wholeShard(graph_.tensor(c), fmt::format("c{}", c), true));
    }
  }

  Status addInputs() {
    layout_.inputs = wholeInputs(graph_);
    for (InputSpec &in : layout_.inputs)
      if (const SubTensor *piece = pg_.tensors[static_cast<size_t>(in.tensor)].pieceOn(device_)) {
        if (piece->interleaved())
          return errorf("error: the plan cuts graph input '{}' (%{}) interleaved {}; inputs are "
                        "fed in contiguous pieces",
                        graph_.tensor(in.tensor).name, in.tensor, piece->str());
        in.start = piece->start;
        in.stop = piece->stop;
      }
    return Status::ok();
  }

  void addLoss() {
    const transform::LossInfo &loss = pg_.loss;
    for (const transform::LossPart &part : loss.parts)
      if (part.device == device_)
        layout_.lossScale = part.scale;
    layout_.lossReplicas = loss.partial ? 1 : std::max<int>(1, int(loss.parts.size()));
  }

  // The manifest reducer for `r`: a sum inside the copy (partial gradients)
  // averaged over copies, or an average over every replica.
  ReducerSpec reducerFor(const transform::GradReducer *r) const {
    ReducerSpec spec;
    std::vector<int> devices = r ? r->devices : std::vector<int>{device_};
    std::vector<int> ranks;
    for (int c = 0; c < layout_.dpSize; ++c)
      for (int d : devices)
        ranks.push_back(c * layout_.planNgpus + d);
    std::sort(ranks.begin(), ranks.end());
    spec.group = job_.groupId(ranks);
    if (r && r->reduce == transform::GradReduce::Sum) {
      spec.average = false;
      spec.divisor = layout_.dpSize > 1 ? layout_.dpSize : 0;
    }
    if (r && r->stageCopies > 1) {
      // Copies in several stages add up; replicas inside a stage (whole,
      // identical gradients) and data-parallel copies average.
      int perStage = r->reduce == transform::GradReduce::Sum
                         ? 1
                         : static_cast<int>(r->devices.size()) / r->stageCopies;
      spec.average = false;
      spec.divisor = perStage * layout_.dpSize;
      if (spec.divisor == 1)
        spec.divisor = 0;
    }
    return spec;
  }

  Status addReducers() {
    std::map<int64_t, const transform::GradReducer *> byTensor;
    for (const transform::GradReducer &r : pg_.reducers)
      if (std::find(r.devices.begin(), r.devices.end(), device_) != r.devices.end())
        byTensor[r.tensor] = &r;
    for (const ShardSpec &s : layout_.shards) {
      const ir::Tensor &t = graph_.tensor(s.tensor);
      if (s.constant || t.kind != ir::TensorKind::Param || !t.requiresGrad)
        continue;
      auto it = byTensor.find(s.tensor);
      const transform::GradReducer *r = it == byTensor.end() ? nullptr : it->second;
      if (r && (r->slice.start != s.start || r->slice.stop != s.stop))
        return Status::internal(fmt::format("error: the gradient reducer of '{}' covers {} but "
                                            "plan device {} holds another slice",
                                            t.name, r->slice.str(), device_));
      ReducerSpec spec = reducerFor(r);
      if (spec.group < 0)
        return Status::internal(
            fmt::format("error: no communication group for the reducer of '{}'", t.name));
      addToReducer(std::move(spec), s.localName);
    }
    return Status::ok();
  }

  // Each buffer piece the forward writes and other ranks hold too, in the
  // group of all its holders (buffers nobody writes stay equal by themselves).
  Status addBufferSyncs() {
    std::vector<bool> written = ops::writtenBuffers(graph_);
    for (const ShardSpec &s : layout_.shards) {
      if (s.constant || !written[static_cast<size_t>(s.tensor)])
        continue;
      std::vector<int> ranks;
      for (int c = 0; c < layout_.dpSize; ++c)
        for (int d : bufferHolders(pg_, s.tensor, device_))
          ranks.push_back(c * layout_.planNgpus + d);
      if (ranks.size() < 2)
        continue;
      std::sort(ranks.begin(), ranks.end());
      int group = job_.groupId(ranks);
      if (group < 0)
        return Status::internal(fmt::format("error: no communication group for buffer '{}'",
                                            graph_.tensor(s.tensor).name));
      addBufferSync(layout_, group, s.localName);
    }
    return Status::ok();
  }

  // The model chunks of a pipelined rank: each stage on this device, the
  // tensors it receives and sends (StageTransfer) and the schedule's steps.
  Status addChunks() {
    std::vector<std::vector<int>> physical; // distinct device sets, in stage order
    std::vector<int> mine;
    for (size_t st = 0; st < pg_.stageDevices.size(); ++st) {
      std::vector<int> set = pg_.stageDevices[st];
      std::sort(set.begin(), set.end());
      auto index = static_cast<int>(std::find(physical.begin(), physical.end(), set) -
                                    physical.begin());
      if (index == static_cast<int>(physical.size()))
        physical.push_back(set);
      if (std::binary_search(set.begin(), set.end(), device_)) {
        layout_.stage = index;
        mine.push_back(static_cast<int>(st));
      }
    }
    layout_.stages = static_cast<int>(physical.size());
    layout_.schedule = job_.schedule;
    layout_.microBatches = job_.microBatches;
    int lossStage = pg_.loss.node >= 0 ? pg_.stageOfNode[static_cast<size_t>(pg_.loss.node)] : -1;
    bool holdsLoss = false;
    for (int st : mine) {
      ChunkSpec chunk;
      chunk.stage = st;
      chunk.function = fmt::format("stage{}", st);
      for (size_t k = 0; k < pg_.transfers.size(); ++k) {
        const transform::StageTransfer &tr = pg_.transfers[k];
        if (tr.to == st)
          addPipeTensor(tr, static_cast<int>(k), tr.from, tr.target, tr.source, chunk.recv);
        if (tr.from == st)
          addPipeTensor(tr, static_cast<int>(k), tr.to, tr.source, tr.target, chunk.send);
      }
      for (const transform::LossPart &part : pg_.loss.parts)
        chunk.hasLoss = chunk.hasLoss || (st == lossStage && part.device == device_);
      holdsLoss = holdsLoss || chunk.hasLoss;
      if (!chunk.hasLoss && chunk.send.empty())
        return errorf("error: pipeline stage {} on plan device {} neither sends anything nor "
                      "computes the loss; the cut leaves it nothing to do",
                      st, device_);
      layout_.chunks.push_back(std::move(chunk));
    }
    if (!holdsLoss)
      layout_.lossOutput = -1;
    for (const char *schedule : {layout_.schedule.c_str(), "forward"}) {
      auto passes = plan::pipelinePasses(schedule, layout_.stages,
                                              static_cast<int>(mine.size()),
                                              std::string(schedule) == "forward" ? 1
                                                                                 : layout_.microBatches,
                                              layout_.stage);
      if (!passes)
        return passes.status();
    }
    return Status::ok();
  }

  // This device's piece of `tr` in `here` (sent or received) and its peer in
  // `there`, the same position of the other stage's layout (virtual stage
  // `peerStage`).
  void addPipeTensor(const transform::StageTransfer &tr, int tag, int peerStage,
                     const transform::RvdLayout &here, const transform::RvdLayout &there,
                     std::vector<PipeTensorSpec> &out) const {
    const std::vector<int> &devices = here.devices();
    auto it = std::find(devices.begin(), devices.end(), device_);
    if (it == devices.end())
      return;
    int i = static_cast<int>(it - devices.begin());
    PipeTensorSpec spec;
    spec.tensor = tr.tensor;
    spec.shape = transform::pieceOf(here, tr.tensor, i).shape();
    spec.peer = layout_.dpRank * layout_.planNgpus + there.devices()[static_cast<size_t>(i)];
    spec.tag = tag;
    spec.peerStage = peerStage;
    spec.requiresGrad = tr.needsGrad;
    out.push_back(std::move(spec));
  }

  void addToReducer(ReducerSpec spec, const std::string &shard) {
    for (ReducerSpec &r : layout_.reducers)
      if (r.group == spec.group && r.average == spec.average && r.divisor == spec.divisor) {
        r.shards.push_back(shard);
        return;
      }
    spec.shards.push_back(shard);
    layout_.reducers.push_back(std::move(spec));
  }

  const ir::Graph &graph_;
  const JobLayout &job_;
  const PartitionedGraph &pg_;
  RankLayout layout_;
  int device_ = 0;
};

} // namespace

Expected<RankLayout> layoutPartitionedRank(const ir::Graph &graph, const JobLayout &job, int rank) {
  return RankBuilder(graph, job, rank).build();
}

} // namespace nnsc::codegen
