#pragma once
/// nnsc-merge-ckpt: reassembles every original tensor from the shards of all
/// ranks — slices copied into place, value chunks (partial sums) added,
/// replicas checked bit-equal — and writes {state_dict name -> tensor},
/// tied aliases included, as a torch.save-compatible file (a pickled
/// c10::Dict<std::string, at::Tensor>) that Python loads with torch.load and
/// model.load_state_dict.

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
  std::string output;       ///< the merged file (merged.pt); empty: do not write one
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
};

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
