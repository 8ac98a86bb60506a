#pragma once
/// ZeRO-3: parameter values sharded over the data-parallel copies, each
/// recompute group's parameters whole only while the group runs, as
/// DeepSpeed's stage 3 and FSDP with activation checkpointing keep them.
///
/// A unit is a recompute function of the rank program (docs/recompute.md)
/// and the trainable shards it alone reads (manifest Shard.zero3_function).
/// Their reducer builds buckets that never mix units; the bucket's
/// ZeroOptimizer keeps this rank's range of their values (ZeroOptimizer.h).
/// add() binds the parameters of each unit bucket as views of one flat of
/// the bucket's padded size, so a gather is one all-gather into a fresh
/// buffer whose memory the flat's storage then takes (no copy), and a
/// release hands that memory back: the parameters keep their shapes (and
/// autograd its metadata) with no elements behind them.
///
/// nnsc.recompute gathers its function's unit before running it (forward,
/// the re-run in backward, validation) and releases it after; the
/// parameters' gradients flow to the reducer as under ZeRO-2. Nothing else
/// reads these parameters: checkpoints take their values from the
/// optimizer (gatherMasters), resumes give them back through loadMaster.

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Reducer.h"
#include "nnsc/Runtime/ZeroOptimizer.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

class Zero3Params {
public:
  Zero3Params() = default;
  ~Zero3Params();
  Zero3Params(const Zero3Params &) = delete;
  Zero3Params &operator=(const Zero3Params &) = delete;

  /// Takes `reducer`'s unit buckets (Reducer::bucketUnit; `units[u]` names
  /// unit u's function), whose ranges `optimizer` holds, and binds their
  /// parameters to one flat per bucket. Call while the parameters are
  /// whole, before the first forward; releaseAll() then frees them.
  void add(Reducer &reducer, ZeroOptimizer &optimizer, const std::vector<std::string> &units);

  /// Makes `function`'s parameters whole: every bucket's all-gather is
  /// launched, then each waited for. Nothing for a function without any.
  /// Calls nest: only the first gathers. The error names the group, the
  /// bucket's first parameter and the function.
  Status gather(const std::string &function);
  /// Frees `function`'s parameters again (the last of nested calls).
  void release(const std::string &function);
  void releaseAll();

  bool empty() const { return entries_.empty(); }
  /// Whether `t` is a view of a gathered bucket (it would lose its elements
  /// at the release).
  bool aliases(const at::Tensor &t) const;
  /// Bytes of parameters this rank holds whole at most between units: none;
  /// and the buckets' padded sizes, for the banner.
  int64_t bucketBytes() const;
  size_t numBuckets() const { return entries_.size(); }
  size_t numUnits() const { return byFunction_.size(); }

  /// The trainer's, for nnsc.recompute; null when the job runs no ZeRO-3.
  static Zero3Params *active();
  static void setActive(Zero3Params *params);

private:
  struct Entry {
    Reducer *reducer = nullptr;
    ZeroOptimizer *optimizer = nullptr;
    size_t bucket = 0;
    at::Tensor whole; ///< the bucket's padded flat; the parameters are views of it
    int uses = 0;     ///< nested gathers
  };
  void free(Entry &e);

  std::vector<Entry> entries_;
  std::map<std::string, std::vector<size_t>> byFunction_;
};

} // namespace nnsc::rt
