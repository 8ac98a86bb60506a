#pragma once
/// One rank's part of a checkpoint (layout in CheckpointStore.h):
///   rank{r}.safetensors  "shard/<local name>" for every shard (parameters and
///                        buffers) and "optim/<local name>/<field>" for the
///                        optimizer state (exp_avg, exp_avg_sq, step,
///                        momentum_buffer; under ZeRO-1 "<field>@<offset>"
///                        pieces, ZeroOptimizer.h)
///   rank{r}.json         step, data position, learning-rate schedule, the
///                        CPU generator state (hex), config hash, the job's
///                        shape and the shard table (ShardTable.h) that lets
///                        nnsc-merge-ckpt work without the program
/// Each file is written atomically (temporary name, fsync, rename).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/CheckpointMeta.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

struct RankState {
  CheckpointMeta meta;
  std::map<std::string, at::Tensor> shards;    ///< local name -> tensor
  std::map<std::string, at::Tensor> optimizer; ///< Optimizer::state() keys
};

/// Writes rank `rank`'s two files into `dir` (which must exist).
Status writeRankCheckpoint(const std::string &dir, int rank, const RankState &state);

/// Reads them back (CPU tensors); errors name the file.
Expected<RankState> readRankCheckpoint(const std::string &dir, int rank);

/// Reads only rank{r}.json of `dir`.
Expected<CheckpointMeta> readCheckpointMeta(const std::string &dir, int rank);

/// The state of `device`'s default generator ("cpu", "cuda:1") as bytes,
/// and back (a refused state is an error naming `from`).
std::string generatorState(const c10::Device &device);
Status setGeneratorState(const c10::Device &device, const std::string &bytes,
                         const std::string &from);
/// The default CPU generator's.
std::string cpuRngState();
Status setCpuRngState(const std::string &bytes, const std::string &from);

} // namespace nnsc::rt
