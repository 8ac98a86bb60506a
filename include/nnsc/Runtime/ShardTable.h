#pragma once
/// What each local tensor of a rank is: the manifest's Shard entries in a
/// plain form that checkpoints carry (rank{r}.json) and nnsc-merge-ckpt
/// reassembles from, so a checkpoint can be merged without the program.
/// No LibTorch.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "nnsc/Support/Status.h"

namespace nnsc::proto {
class RankManifest;
}

namespace nnsc::rt {

/// The most ranks a manifest or a checkpoint may name: nnsc-plan's limit on
/// --runtime-ngpus (plan::kMaxRuntimeNgpus), checked before anything loops
/// over ranks.
inline constexpr int kMaxJobRanks = 1 << 17;

struct ShardInfo {
  std::string localName;    ///< argument name in the rank program ("p3")
  std::string originalName; ///< state_dict key in the original model
  std::vector<std::string> aliases;
  std::vector<int64_t> fullShape, shape;
  std::vector<int64_t> start, stop; ///< per dim, [start, stop) of the full tensor
  /// Per dim, blocks the dim is cut interleaved over (start/stop are offsets
  /// within each block; Support/BlockSlice.h); empty: contiguous.
  std::vector<int64_t> blocks;

  int valueIndex = 0, valueChunks = 1;
  std::string dtype = "F32"; ///< safetensors code
  bool trainable = true;
  int replicas = 1;
  int reducer = -1;
};

/// Reads and parses a binary rank manifest (rank{r}.pb); errors name the file.
Expected<proto::RankManifest> loadRankManifest(const std::string &path);

/// The shards of a manifest, in manifest order. Shards without a slice map
/// cover their whole tensor.
std::vector<ShardInfo> shardsOfManifest(const proto::RankManifest &manifest);

/// The safetensors code of a manifest DType value ("F32"); empty if unknown.
std::string safetensorsCodeOfProtoDType(int dtype);

nlohmann::json shardsToJson(const std::vector<ShardInfo> &shards);
/// Parses shardsToJson's output; errors name `file`.
Expected<std::vector<ShardInfo>> shardsFromJson(const nlohmann::json &j, const std::string &file);

} // namespace nnsc::rt
