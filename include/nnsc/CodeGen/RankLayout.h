#pragma once
/// What one rank runs and holds: the interface of its program (shards, then
/// inputs, then the device), the statements it executes (node parts with
/// local arguments, and the nnsc.* calls of communication adapters), its
/// communication groups, gradient reducers and loss scaling. Codegen, the
/// manifest and the shard writer all read the same RankLayout, so the
/// program's argument order, the manifest's shard order and the weights file
/// agree.
///
/// Ranks: runtime_ngpus = dp_size x plan_ngpus. Rank r plays plan device
/// r mod plan_ngpus of data-parallel copy r div plan_ngpus: copy c uses global
/// ranks c*T .. c*T+T-1 (T = plan_ngpus), and its communication groups are
/// copy 0's shifted by c*T.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"
#include "nnsc/Transform/Partition.h"
#include "nnsc/plan.pb.h"

namespace nnsc::codegen {

/// One program argument backed by stored data: a parameter, a buffer or a
/// tensor constant of the model (a literal too big to write inline).
struct ShardSpec {
  int64_t tensor = -1;              ///< IR tensor id of the full tensor
  std::string localName;            ///< argument name: "p3" (state) or "c36" (constant)
  bool constant = false;            ///< a model literal, not a state_dict entry
  std::vector<int64_t> start, stop; ///< the part of the full tensor held, per dim
  /// Per dim, blocks the dim is cut interleaved over (start/stop are then
  /// offsets within each block; Support/BlockSlice.h); empty: contiguous.
  std::vector<int64_t> blocks;
  int valueIndex = 0, valueChunks = 1;
  int replicas = 1; ///< ranks of one plan copy holding the same part

  ir::Shape shape() const; ///< (stop - start) * blocks per dim
};

/// One forward argument of the model, fed by the trainer.
struct InputSpec {
  int64_t tensor = -1;
  std::string localName; ///< the forward's argument name, made a safe identifier
  ir::Shape shape;       ///< what this rank feeds (the copy's whole micro-batch)
  int batchDim = 0;      ///< the dim data-parallel copies split; -1 for 0-dim inputs
  /// The piece of the fed tensor the program works on, per dim [start, stop)
  /// (the plan splits some inputs over the plan devices); the program narrows
  /// to it first. Equal to [0, shape) when the input is used whole.
  std::vector<int64_t> start, stop;

  bool isWhole() const; ///< start all 0 and stop == shape
};

/// A communication group of the job: global ranks, ascending (also the
/// member order of the collectives run on it).
struct CommGroupSpec {
  int id = 0;
  std::vector<int> ranks;
};

/// One nnsc.* call of an adapter, on this rank.
struct CommCall {
  /// nnsc operator: "all_reduce", "all_gather", ...; or "reshape", a local
  /// view (x.reshape(shape)) in or out of interleaved blocks: no group.
  std::string op;
  ir::Shape shape; ///< reshape's target shape

  /// Integer arguments before `group`, by keyword: {"dim", 2}.
  std::vector<std::pair<std::string, int64_t>> args;
  int group = 0;          ///< a CommGroupSpec id
  std::vector<int> ranks; ///< that group's ranks
  std::string move;       ///< "V->R", "D2->R (backward: split)", ...
};

/// One statement group of the program, in execution order.
struct RankStep {
  enum Kind { Node, Adapter, StateWrite } kind = Node;
  // Node: a node (or this rank's part of it) with arguments rewritten for
  // the local shapes, reading input i from adapter inputAdapters[i] (>= 0) or
  // from the tensor's own value on this rank (-1).
  int64_t node = -1;
  std::vector<ir::Argument> args;
  std::vector<int> inputAdapters;
  // A random node (ops::drawsRandomValues) whose parts compute different
  // pieces of its output: the ordinal of this rank's piece among the distinct
  // pieces (replicas of a piece share it); -1 when the node is not split. The
  // program draws the piece from a stream of its own (docs/randomness.md).
  int rngPiece = -1;
  // The node's recompute group (plan NodePlan.recompute_group), -1: none. The
  // program runs each contiguous run of a group's steps as a function of its
  // own through nnsc.recompute (docs/recompute.md).
  int recomputeGroup = -1;
  // Adapter: the calls that move `tensor` from its producer's layout to its
  // readers' (`description` says both).
  int adapter = -1;
  int64_t tensor = -1;
  std::string description;
  std::vector<CommCall> calls;
  // StateWrite: buffer `tensor` (a shard of this rank) takes, in place, the
  // value of tensor `value` (after adapter `adapter` when >= 0). Written
  // after every node and adapter.
  int64_t value = -1;
  // The pipeline stage the step belongs to (0 without stages).
  int stage = 0;
};

/// A tensor crossing pipeline stages at this rank (manifest PipeTensor).
struct PipeTensorSpec {
  int64_t tensor = -1;
  ir::Shape shape; ///< this rank's piece
  int peer = 0;    ///< global rank
  int tag = 0;     ///< the transfer's index
  int peerStage = 0; ///< the virtual stage at the other end
  bool requiresGrad = false;
};

/// One model chunk of a pipelined rank: the steps of virtual stage `stage`
/// as function `function`.
struct ChunkSpec {
  int stage = 0;
  std::string function;
  std::vector<PipeTensorSpec> recv, send;
  bool hasLoss = false;
};

/// Gradients of `shards` summed over `group` after backward, then divided
/// by the group size (`average`) or by `divisor` (> 0).
struct ReducerSpec {
  int group = 0;
  std::vector<std::string> shards; ///< local names, in shard order
  bool average = true;
  int divisor = 0;
  /// ZeRO in blocks (JobLayout::zeroNgroups > 1; manifest ZeroSplit): the
  /// group of the reducer's ranks in this rank's block (-1: this rank alone,
  /// nothing sharded) and of those at its place in every block.
  bool zeroSplit = false;
  int zeroShardGroup = -1, zeroCrossGroup = -1;
};

/// ZeRO in blocks: `ranks` (a reducer's group, ascending) cut by the blocks
/// of worldSize / ngroups consecutive ranks. `shard`: the members in `rank`'s
/// block; `cross`: the members at rank's place among those, one per block.
/// Both empty when the blocks hold different numbers of members.
struct ZeroSplitRanks {
  std::vector<int> shard, cross;
};
ZeroSplitRanks zeroSplitOf(const std::vector<int> &ranks, int worldSize, int ngroups, int rank);

/// Buffers `shards` held, piece for piece, by every rank of `group` (the same
/// plan device in every data-parallel copy, and plan-level replicas): the
/// trainer keeps them equal (manifest BufferSync).
struct BufferSyncSpec {
  int group = 0;
  std::vector<std::string> shards; ///< local names, in shard order
};

struct RankLayout {
  int rank = 0, worldSize = 1;
  int planNgpus = 1, planDevice = 0; ///< the plan device this rank plays
  int dpSize = 1, dpRank = 0;        ///< data-parallel copies, and which one
  int zero = 0;                      ///< the plan's ZeRO stage
  int zeroNgroups = 1;               ///< and its blocks of ranks
  std::vector<ShardSpec> shards;     ///< program arguments first, in this order
  std::vector<InputSpec> inputs;     ///< then these, then `device: Device`
  std::vector<int64_t> nodes;        ///< node ids this rank executes, in order
  std::vector<RankStep> steps;       ///< what it executes, adapters included
  std::vector<int64_t> outputs;      ///< tensor ids returned, loss first
  int lossOutput = -1;               ///< index into outputs, -1: none
  /// The loss this rank returns, times lossScale, is its share of the copy's
  /// loss; lossReplicas ranks of the copy hold the same value.
  double lossScale = 1.0;
  int lossReplicas = 1;
  std::vector<CommGroupSpec> groups; ///< the groups this rank is in, by id
  std::vector<ReducerSpec> reducers;
  std::vector<BufferSyncSpec> bufferSyncs; ///< one per group, ascending group id
  /// Per recompute group id, what it is ("transformer.h.0 (Block)").
  std::vector<std::string> recomputeGroups;

  /// Pipelined plans: this rank's physical stage of `stages`, its chunks in
  /// virtual-stage order, the schedule and micro-batches (chunks empty
  /// otherwise). One program function per chunk (ChunkSpec::function).
  int stages = 1, stage = 0;
  std::vector<ChunkSpec> chunks;
  std::string schedule;
  int microBatches = 1;

  // The function a program emitter writes: set on the per-chunk views
  // emitProgram makes (received tensors are arguments after the inputs).
  std::string function = "forward";
  std::vector<int64_t> received;
  bool header = true;
};

/// What every rank of a job shares: the partitioned graph (plans spanning
/// several devices) and the job's communication groups, numbered once so
/// that all ranks agree on the ids.
struct JobLayout {
  int planNgpus = 1, dpSize = 1, worldSize = 1;
  int zero = 0; ///< the plan's ZeRO stage
  int zeroNgroups = 1; ///< ZeRO's blocks of ranks (plan.proto zero_ngroups)
  /// The partition pass's result; absent for plans on one device (plan_ngpus
  /// 1), which run every node whole.
  std::optional<transform::PartitionedGraph> partition;
  std::vector<CommGroupSpec> groups; ///< id = index
  /// Per node id, its recompute group (-1: none); per group id, what it is.
  std::vector<int> recomputeOfNode;
  std::vector<std::string> recomputeGroups;
  /// The plan's pipeline schedule and micro-batches.
  std::string schedule;
  int microBatches = 1;

  /// The id of the group with exactly these ranks (ascending), or -1.
  int groupId(const std::vector<int> &ranks) const;
};

/// Partitions `graph` by a validated `plan` (when it spans several devices)
/// and numbers the communication groups of every data-parallel copy: the
/// adapters' groups first (copy by copy, adapter by adapter), then the
/// gradient reducers' (a parameter slice's holders in every copy), then the
/// buffers' (a buffer piece's holders in every copy, when more than one), then
/// under ZeRO in blocks each reducer group's per-block shard groups (of more
/// than one rank) and cross-block groups. Errors:
/// the partition pass's, and an adapter whose collective members are not in
/// ascending device order (all_reduce groups are reordered freely).
Expected<JobLayout> layoutJob(const ir::Graph &graph, const proto::Plan &plan);

/// The layout of `rank` (0 .. runtime_ngpus-1) of `job`.
Expected<RankLayout> layoutRank(const ir::Graph &graph, const JobLayout &job, int rank);

/// layoutJob, then layoutRank (for tests and one-off uses).
Expected<RankLayout> layoutRank(const ir::Graph &graph, const proto::Plan &plan, int rank);

} // namespace nnsc::codegen
