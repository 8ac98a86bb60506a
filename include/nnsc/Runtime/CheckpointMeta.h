#pragma once
/// rank{r}.json of a checkpoint (Checkpoint.h): the step, data position,
/// learning-rate schedule, CPU generator state, config hash, the job's shape
/// and the shard table. No LibTorch, so it can be read (and fuzzed) alone.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "nnsc/Runtime/LossScaler.h"
#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

struct CheckpointMeta {
  int64_t step = 0;         ///< optimizer steps completed
  int64_t dataPosition = 0; ///< the next training step the data will serve
  std::string lrSchedule;   ///< schedule name
  double baseLr = 0, lastLr = 0;
  std::string rngState; ///< CPU generator state (raw bytes)
  /// On cuda, the training device's generator too (dropout draws there).
  std::string cudaRngState;
  std::string configHash;
  int rank = 0, worldSize = 1, dpSize = 1, dpRank = 0, planNgpus = 1;
  int zero = 0; ///< ZeRO stage of the run: 1 stores optimizer states as owned pieces
  int zeroNgroups = 1; ///< ZeRO's blocks of ranks (plan zero_ngroups): pieces repeat per block
  std::string modelName;
  std::vector<ShardInfo> shards;
  /// fp16 runs: the dynamic loss scale, so a resume scales as the run would.
  std::optional<LossScaleState> lossScale;
  /// checkpoint.save_best: the lowest validation loss up to this step and the step it was
  /// measured after (checkpoints/best holds that step), so a resume keeps comparing with it.
  struct BestValidation {
    int64_t step = 0;
    double valLoss = 0;
  };
  std::optional<BestValidation> best;
};

/// The text of rank{r}.json for `meta` (one key per line, a final newline).
std::string checkpointMetaText(const CheckpointMeta &meta);

/// Parses the text of a rank{r}.json; errors name `path` and the bad key.
Expected<CheckpointMeta> parseCheckpointMeta(const std::string &text, const std::string &path);

} // namespace nnsc::rt
