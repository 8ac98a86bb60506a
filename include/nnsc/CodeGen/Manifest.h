#pragma once
/// Per-rank manifests (rank{r}.pb, proto::RankManifest): everything the
/// runtime needs to call a rank's program, load its shards, communicate and
/// merge checkpoints, without reading the IR.

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/Cost/Memory.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::codegen {

constexpr uint32_t kManifestFormatVersion = 2; ///< 2: PipeTensor.peer_stage
constexpr int64_t kDefaultBucketBytes = 25ll << 20;

struct ManifestOptions {
  int64_t bucketBytes = kDefaultBucketBytes; ///< gradient allreduce bucket size
  bool weightsWritten = true;                ///< false: no rank{r}.safetensors
};

/// Sets `m.memory_estimate` from the cost model's view of the plan device
/// the rank plays (cost::deviceMemory without optimizer states) and the
/// gradient buckets of m's reducers (each reduced gradient is copied into a
/// persistent flat bucket; under ZeRO the bucket is padded and a shard of it
/// is kept too). Call after buildManifest. `load16`, when given, is the
/// same device's load on the graph in mixed precision's dtypes
/// (cost::atPrecision); it sets `m.memory_estimate_16bit` alike.
void fillMemoryEstimate(const cost::DeviceLoad &load, proto::RankManifest &m,
                        const cost::DeviceLoad *load16 = nullptr);

/// The manifest of `layout`'s rank: program and weights file names, inputs,
/// shards with their slice of the full tensor, the data-parallel group
/// (group 0) and one averaging reducer over the trainable shards.
proto::RankManifest buildManifest(const ir::Graph &graph, const RankLayout &layout,
                                  const ManifestOptions &options);

/// The text form (`nnsc-codegen --print`, `--print-manifest`):
///   manifest rank 0 of 2: plan_ngpus 1, data-parallel copy 0 of 2, model GPT
///   shard p0 transformer.wte.weight: float32[65, 32] of [65, 32] at [0:65, 0:32] ...
void printManifest(const proto::RankManifest &manifest, std::ostream &os);
/// The manifest as JSON (protobuf's mapping, proto field names) for scripts.
std::string manifestToJson(const proto::RankManifest &manifest);

/// Whether both ends of every pipeline channel (the values, or the
/// gradients, one rank sends another: the runtime's pipelineChannelGroup)
/// list the same transfers in the same order, in the training and the
/// evaluation schedules: NCCL pairs a send with a receive by their order on
/// the channel, not by tag, so a difference would swap tensors or hang. An
/// error names the channel, the schedule and the first transfer that differs.
Status checkPipelineChannels(const std::vector<const proto::RankManifest *> &ranks);

Status writeManifest(const proto::RankManifest &manifest, const std::string &path);
/// Errors name the file: "rank0.pb: error: not an nnsc rank manifest".
Expected<proto::RankManifest> readManifest(const std::string &path);
/// As readManifest, from the file's `bytes`; `path` names it in errors.
Expected<proto::RankManifest> parseManifest(const std::string &bytes, const std::string &path);

} // namespace nnsc::codegen
