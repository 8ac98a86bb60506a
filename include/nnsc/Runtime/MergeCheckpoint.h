#pragma once
/// nnsc-merge-ckpt: reassembles every original tensor from the shards of all
/// ranks — slices copied into place, value chunks (partial sums) added,
/// replicas checked bit-equal — and writes {state_dict name -> tensor},
/// tied aliases included, as a torch.save-compatible file (a pickled
/// c10::Dict<std::string, at::Tensor>) that Python loads with torch.load and
/// model.load_state_dict.
///
/// Beside it, FILE.optim.pt (optimizerFileOf) holds what resuming needs, in
/// the same format, keyed by the original parameter names:
///   "<name>/exp_avg", "<name>/exp_avg_sq", "<name>/momentum_buffer"
///                        the optimizer state of the whole parameter (ZeRO
///                        pieces and tensor-parallel slices reassembled)
///   "<name>/step"        its float32 step count (Adam, AdamW)
///   "nnsc/step", "nnsc/data_position"       int64 scalars
///   "nnsc/base_lr", "nnsc/last_lr"          float64 scalars
///   "nnsc/world_size", "nnsc/dp_size", "nnsc/plan_ngpus", "nnsc/zero"
///                                           int64: the run that wrote it
///   "nnsc/rng_state/<copy>"  uint8: the CPU generator of each data-parallel
///                        copy (its first rank's)

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

struct MergeOptions {
  /// A checkpoint directory (step-<N>), a run directory (its newest complete
  /// checkpoint), or with fromProgram a program directory.
  std::string input;
  std::string output; ///< the merged file (merged.pt); empty: do not write one
  /// Where the optimizer and training state go; empty: optimizerFileOf(output).
  std::string optimizerOutput;
  std::string manifests;    ///< optional program directory: shard tables from rank{r}.pb
  bool fromProgram = false; ///< merge the program's initial rank{r}.safetensors
  /// Original names left out of the merge (e.g. buffers whose data-parallel
  /// replicas legitimately differ); their aliases go with them.
  std::set<std::string> exclude;
};

struct MergeResult {
  std::string source; ///< the directory actually merged
  int ranks = 0;
  int64_t tensors = 0; ///< original tensors
  int64_t aliases = 0; ///< extra names of tied tensors
  /// Every merged tensor by state_dict name, tied aliases included.
  std::map<std::string, at::Tensor> merged;
  /// The optimizer and training state (FILE.optim.pt's keys); empty when
  /// merging a program.
  std::map<std::string, at::Tensor> optimizer;
  std::string optimizerOutput; ///< where it was written, if it was
};

/// "merged.pt" -> "merged.optim.pt"; other names get ".optim.pt" appended.
std::string optimizerFileOf(const std::string &mergedFile);

/// One rank's optimizer state in a checkpoint, with what it needs to merge.
struct RankOptimizerState {
  int rank = 0;
  std::vector<ShardInfo> table;
  std::map<std::string, at::Tensor> state; ///< Optimizer/ZeroOptimizer::state() keys
  /// ZeRO's blocks of ranks in the run (CheckpointMeta::zeroNgroups): above 1,
  /// every block holds the same pieces, which must then be equal bit for bit.
  int zeroNgroups = 1;
};

/// Reassembles the optimizer states of all ranks into whole-parameter
/// states keyed "<original name>/<field>": ZeRO pieces ("<field>@<offset>")
/// are joined into their shard first (they must tile it exactly), then the
/// shards are assembled as assembleShards does the weights; replicas must
/// agree bit for bit, step counts too.
Expected<std::map<std::string, at::Tensor>>
assembleOptimizerStates(const std::vector<RankOptimizerState> &ranks);

Expected<MergeResult> mergeCheckpoint(const MergeOptions &options);

/// One rank's local tensor and what part of which original tensor it is.
struct ShardPiece {
  ShardInfo info;
  at::Tensor value;
  int rank = 0;
};

/// Reassembles the original tensors from `pieces`; the result has one entry
/// per original name and per alias. Errors: gaps or overlaps in a value
/// chunk, replicas that differ, shapes or dtypes that disagree.
Expected<std::map<std::string, at::Tensor>> assembleShards(const std::vector<ShardPiece> &pieces);

/// Writes `tensors` as a pickled dict loadable by Python's torch.load.
Status saveStateDict(const std::map<std::string, at::Tensor> &tensors, const std::string &path);

} // namespace nnsc::rt
