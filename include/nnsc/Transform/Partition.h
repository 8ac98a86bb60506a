#pragma once
/// The partition pass: a graph and a plan in, one program per plan device out
/// (as data): which part of every node each device runs, on which sub-tensors,
/// and the communication between producers and consumers that the plan's
/// splits imply, found by the RVD search (RvdSearch.h).
///
/// A codegen walks `deviceProgram(pg, d)` for each plan device d and emits, in
/// order, node parts (the IR op with `localArgs`, local shapes from the
/// sub-tensors) and adapters (one `nnsc.<op>(x, args..., group=G)` call per
/// CommOp, G the group of `groups` that holds d). Data-parallel copies of the
/// plan (runtime_ngpus / plan_ngpus) run the same program on shifted ranks.
///
/// Gradient convention (what the backward of every CommOp assumes): the
/// gradient a device holds for its piece of a tensor is the *whole* gradient
/// of that piece, except where an adapter's last CommOp says its backward
/// reduces partial gradients (all_gather with reduce_scatter backward,
/// identity_all_reduce). So:
///  - a replicated node (num 1 on several devices) computes identical whole
///    gradients on every device;
///  - a split node reading an input whole (the input lacks the split
///    identifier) makes that input's gradient partial on each part; the
///    adapter feeding it ends with a CommOp whose backward sums them
///    (Megatron's f: identity forward, all_reduce backward), except for a
///    parameter read directly from its shard: there the partial sums stay and
///    the parameter's GradReducer sums them after backward;
///  - a value-split node (a `k+` identifier) writes partial sums; consumers
///    read them through all_reduce (backward identity: Megatron's g) or
///    reduce_scatter.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"
#include "nnsc/Transform/RvdLayout.h"
#include "nnsc/Transform/RvdPrimitive.h"
#include "nnsc/Transform/RvdSearch.h"
#include "nnsc/plan.pb.h"

namespace nnsc::transform {

/// A physical piece of a full tensor: per-dim [start, stop) and value chunk
/// `valueIndex` of `valueChunks` (partial sums: the chunks add up to the
/// piece; 1 chunk = the value itself). An interleaved dim k (blocks[k] = b >
/// 1, RvdLayout.h) is b equal blocks of size full / b; the piece holds
/// [start, stop) of each block (offsets within the block), blocks in order.
struct SubTensor {
  int64_t tensor = -1; ///< IR tensor id
  std::vector<int64_t> start;
  std::vector<int64_t> stop;
  int valueIndex = 0;
  int valueChunks = 1;
  std::vector<int64_t> blocks; ///< per dim; empty = all 1 (contiguous)

  /// The block count of dim k (1 when blocks is empty).
  int64_t blocksOf(size_t k) const { return k < blocks.size() ? blocks[k] : 1; }
  bool interleaved() const;
  /// (stop - start) * blocks per dim: the local shape.
  ir::Shape shape() const;
  /// True when it covers the full tensor of `fullShape` with the whole value.
  bool isWhole(const ir::Shape &fullShape) const;
  /// "[0:2, 0:32, 16:32]" plus " v1/2" for a value chunk; "[]" for 0-dim; an
  /// interleaved dim reads "8:16{3}" (rows 8:16 of each of 3 blocks).
  std::string str() const;
  bool operator==(const SubTensor &o) const;
};

/// The piece device `devices()[i]` holds under `layout` (RvdLayout.h order).
SubTensor pieceOf(const RvdLayout &layout, int64_t tensor, int index);

/// Where a tensor lives before any adapter: the producer's output layout for
/// an activation; the storage (shard) layout for a parameter, buffer or
/// constant (its first consumer's layout: "params take the layout their
/// consumer wants"); the feed layout for a graph input (plan.inputs, or
/// replicated on every plan device).
struct TensorPlacement {
  int64_t tensor = -1;
  RvdLayout layout;
  /// One per entry of layout.devices(), in that order.
  std::vector<SubTensor> pieces;

  /// The piece on plan device `device`, or nullptr when it holds none.
  const SubTensor *pieceOn(int device) const;
};

/// One differentiable communication call: `nnsc.<op>(x, args..., group=g)`.
/// Its forward runs `forward` and its autograd backward runs `backward` on
/// the same groups (RvdAutograd.h, plus the all_gather_split pair below).
struct CommOp {
  /// nnsc operator name without namespace: all_reduce, identity_all_reduce,
  /// all_gather (backward reduce_scatter), all_gather_split (backward: each
  /// member keeps its chunk of the whole gradient), reduce_scatter,
  /// all_to_all, split.
  std::string op;
  std::vector<int64_t> args; ///< integer arguments before `group` (RvdAutograd.h)
  Primitive forward = Primitive::Identity;
  Primitive backward = Primitive::Identity;
  /// Collective groups of plan devices, each in member (group rank) order;
  /// together they cover every device of the adapter.
  std::vector<std::vector<int>> groups;
  /// Local shape of the result on every device (the same on all).
  ir::Shape outShape;

  /// The group that holds `device`, or nullptr.
  const std::vector<int> *groupOf(int device) const;
};

/// Turns one tensor from its placement into the layout a set of consumers
/// reads. Consumers of one tensor that want the same layout share an adapter;
/// each distinct layout gets its own (multiref).
struct Adapter {
  int64_t tensor = -1;
  RvdLayout producer;
  RvdLayout consumer;
  /// The cheapest forward plan (steps over `producer`'s devices); may be empty
  /// when only the backward needs communication.
  RvdPlan forward;
  /// What codegen emits, in forward order; never empty.
  std::vector<CommOp> ops;
  /// (node id, input index) pairs that read the result, in node order.
  std::vector<std::pair<int64_t, int>> readers;
  /// False when no gradient flows back through it (integer tensors, graph
  /// inputs, anything not downstream of a trainable parameter): the ops'
  /// backward never runs.
  bool needsGrad = true;
  /// The pipeline stage of its readers (0 in plans without stages).
  int stage = 0;
};

/// An activation crossing pipeline stages: computed in stage `from` in
/// layout `source` (over that stage's devices), sent whole piece by piece to
/// the stage `to` devices in the same positions (`target`: the same layout
/// over the reader stage's devices), where adapters take it on as usual. Its
/// gradient travels back the same way when `needsGrad`.
struct StageTransfer {
  int64_t tensor = -1;
  int from = 0, to = 0;
  RvdLayout source, target;
  bool needsGrad = false;
};

/// One part of a node, run by one plan device.
struct NodePart {
  int64_t node = -1;
  int part = 0;   ///< 0..num-1; a replicated node's copies are parts 0..k-1 too
  int device = 0; ///< plan device
  /// One per node input: the sub-tensor this part reads.
  std::vector<SubTensor> inputs;
  /// One per node input: the adapter whose result it reads, or -1 to read the
  /// producer's piece (or the shard / program input) on this device directly.
  std::vector<int> inputAdapters;
  /// One per node output: the sub-tensor this part writes (a value chunk for
  /// a value split).
  std::vector<SubTensor> outputs;
};

/// How the gradients of one parameter piece are combined across the plan
/// devices that hold it (before the optimizer; data-parallel copies of the
/// plan are averaged on top of this by the runtime).
enum class GradReduce {
  /// The devices hold partial sums of the gradient: the gradient is their
  /// sum (all_reduce sum over `devices`).
  Sum,
  /// The devices hold identical whole gradients (replicas): nothing to add;
  /// averaging over `devices` keeps replicas bit-identical.
  Average,
};

struct GradReducer {
  int64_t tensor = -1;      ///< a parameter with requires_grad
  SubTensor slice;          ///< the shard
  std::vector<int> devices; ///< plan devices holding this shard, ascending (>= 1)
  GradReduce reduce = GradReduce::Average;
  /// Pipeline stages holding copies of this shard (a weight tied across
  /// stages: nanoGPT's wte and lm_head): each copy's gradient covers its own
  /// stage's uses only, so the copies' gradients add up across stages.
  int stageCopies = 1;
};

/// The loss on each device. A replicated loss node gives every device the
/// whole loss (scale 1). A loss node split by value (`+`, a sum) gives partial
/// sums (scale 1 each). A loss node split along an identifier its output does
/// not carry (each part reduces its own share of the batch, as a mean does)
/// gives per-part losses whose total is the sum of loss_i * share_i, share_i =
/// the part's fraction of that dimension.
struct LossPart {
  int device = 0;
  SubTensor slice; ///< valueIndex/valueChunks: which partial this is
  double scale = 1.0;
};
struct LossInfo {
  int64_t tensor = -1; ///< -1: the graph has no loss
  int64_t node = -1;
  bool partial = false; ///< per-device losses must be added (scaled) for the total
  std::vector<LossPart> parts;
};

/// A buffer write of the graph (ir::StateUpdate) as the devices run it: after
/// every node, each device holding a piece of buffer `state` copies into that
/// piece its piece of `value` in the buffer's stored layout: the result of
/// `adapter` (built without gradient), or `value`'s own piece when -1.
struct StateWrite {
  int64_t state = -1;
  int64_t value = -1;
  int adapter = -1;
};

/// The partitioned graph: everything a codegen needs per plan device.
struct PartitionedGraph {
  int numDevices = 0; ///< plan_ngpus
  /// Pipeline stages: by node id its (virtual) stage, by stage its devices
  /// (one stage holding every device in plans without stages).
  std::vector<int> stageOfNode;
  std::vector<std::vector<int>> stageDevices;
  /// Activations read in a later stage than their producer's, in order of
  /// their first such read.
  std::vector<StageTransfer> transfers;
  /// By tensor id: where every tensor lives before adapters.
  std::vector<TensorPlacement> tensors;
  /// By node id: the node's parts (one per device that runs it).
  std::vector<std::vector<NodePart>> parts;
  std::vector<Adapter> adapters;
  /// One per (trainable parameter, distinct shard), in tensor order.
  std::vector<GradReducer> reducers;
  LossInfo loss;
  /// One per graph state update, in the graph's order.
  std::vector<StateWrite> stateWrites;

  /// The part of node `node` on `device`, or nullptr.
  const NodePart *partOn(int64_t node, int device) const;
};

struct PartitionOptions {
  /// Costs and limits of the RVD search.
  RvdSearchOptions search;
};

/// Partitions `graph` by `plan` (which must pass plan::validatePlan).
/// Pipelined plans (several stages): a reader in a later stage reads the
/// tensor in its producer's layout moved onto the reader stage's devices
/// (StageTransfer); state read in several stages is stored once per stage
/// holding a reader (one placement whose replicas span those stages).
/// Errors: a tensor whose producer and consumer run on different device sets
/// of one stage, stages of different widths, an annotation that no longer
/// binds, the RVD search failing, a buffer that a kernel updates in place
/// (ops::kernelWrittenInputs) reaching it through communication (the update
/// would go to a temporary). Messages name the tensor and nodes.
///
/// State (parameters, buffers, constants) is stored as its first reader
/// wants it, except that a buffer a kernel updates in place is stored as the
/// first such kernel wants it.
Expected<PartitionedGraph> partitionGraph(const ir::Graph &graph, const proto::Plan &plan,
                                          const PartitionOptions &options = {});

/// One entry of a device's program, in execution order.
struct ProgramStep {
  enum Kind { RunAdapter, RunNode, WriteState } kind = RunNode;
  int index = 0; ///< adapter index, node id, or index into stateWrites
};

/// What plan device `device` runs, in order: for every node (topological
/// order) that has a part on `device`, first the adapters that feed it and
/// have not run yet, then the node part; after all nodes, the adapters of
/// the state writes of buffers it holds, then those writes.
std::vector<ProgramStep> deviceProgram(const PartitionedGraph &pg, int device);

/// The node's arguments rewritten for `part`'s local shapes
/// (ops::localizeArgs over the part's input and output sub-tensor shapes).
Expected<std::vector<ir::Argument>> localArgs(const ir::Graph &graph, const NodePart &part);

} // namespace nnsc::transform
