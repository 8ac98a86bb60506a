#pragma once
/// What one rank runs and holds: the interface of its program (shards, then
/// inputs, then the device) and the nodes it executes. Codegen, the manifest
/// and the shard writer all read the same RankLayout, so the program's
/// argument order, the manifest's shard order and the weights file agree.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"
#include "nnsc/plan.pb.h"

namespace nnsc::codegen {

/// One program argument backed by stored data: a parameter, a buffer or a
/// tensor constant of the model (a literal too big to write inline).
struct ShardSpec {
  int64_t tensor = -1;              ///< IR tensor id of the full tensor
  std::string localName;            ///< argument name: "p3" (state) or "c36" (constant)
  bool constant = false;            ///< a model literal, not a state_dict entry
  std::vector<int64_t> start, stop; ///< the part of the full tensor held, per dim
  int valueIndex = 0, valueChunks = 1;
  int replicas = 1; ///< ranks of one plan copy holding the same part

  ir::Shape shape() const; ///< stop - start per dim
};

/// One forward argument of the model, fed by the trainer.
struct InputSpec {
  int64_t tensor = -1;
  std::string localName; ///< the forward's argument name, made a safe identifier
  ir::Shape shape;       ///< what this rank feeds
  int batchDim = 0;      ///< the dim data-parallel copies split; -1 for 0-dim inputs
};

struct RankLayout {
  int rank = 0, worldSize = 1;
  int planNgpus = 1, planDevice = 0; ///< the plan device this rank plays
  int dpSize = 1, dpRank = 0;        ///< data-parallel copies, and which one
  std::vector<ShardSpec> shards;     ///< program arguments first, in this order
  std::vector<InputSpec> inputs;     ///< then these, then `device: Device`
  std::vector<int64_t> nodes;        ///< node ids this rank executes, in order
  std::vector<int64_t> outputs;      ///< tensor ids returned, loss first
  int lossOutput = -1;               ///< index into outputs, -1: none
};

/// The layout of `rank` (0 .. runtime_ngpus-1) under a validated `plan`.
/// Only plans whose nodes are all whole on one plan device are supported
/// now (plan_ngpus 1: data parallelism); others fail with a message naming
/// the first partitioned node.
Expected<RankLayout> layoutRank(const ir::Graph &graph, const proto::Plan &plan, int rank);

} // namespace nnsc::codegen
