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
/// the re-run in backward, validation) and releases it after. With prefetch
/// on (data_parallel.zero3_prefetch, the default), a gather then launches
/// the all-gathers of the unit that followed this one in the same pass
/// before (the order is learned as the units run: forward in program order,
/// backward's re-runs in reverse), so they run while this unit computes, as
/// FSDP's forward and backward prefetch; two units are whole at once. The
/// next gather takes the prefetched buffers if they are its own, and waits
/// for and drops them otherwise. With prefetch on, the unit that backward
/// re-runs first (the forward's last, learned) also stays whole from its
/// forward to that re-run, as FSDP keeps its root: one all-gather fewer a
/// micro-batch and none waited for when backward starts. The
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

  /// Which run of a unit a gather is for: its forward (validation's too)
  /// or its re-run in backward. Each pass learns its own next unit.
  enum class Pass { Forward, Backward };

  /// Makes `function`'s parameters whole: every bucket's all-gather is
  /// launched (or taken from the prefetch), then each waited for; then the
  /// next unit's are launched (prefetch). Nothing for a function without
  /// any. Calls nest: only the first gathers. The error names the group,
  /// the bucket's first parameter and the function.
  Status gather(const std::string &function, Pass pass = Pass::Forward);
  /// A forward of the program begins (a training micro-batch or a
  /// validation batch): the order learned so far does not run on from the
  /// last unit of the pass before.
  void beginForward();
  /// Prefetch the next unit (true: the default).
  void setPrefetch(bool on) { prefetch_ = on; }
  bool prefetch() const { return prefetch_; }
  /// Waits for a prefetch in flight and drops it, and frees a unit kept
  /// whole since its forward: before the optimizer changes the values they
  /// hold (a step leaves neither in a program's usual order: this makes
  /// sure).
  Status drain();
  /// Gathers that made a unit whole; of them, those that took a prefetch;
  /// and prefetches dropped.
  int64_t gathers() const { return gathers_; }
  int64_t prefetchesUsed() const { return prefetchesUsed_; }
  int64_t prefetchesDropped() const { return prefetchesDropped_; }
  /// Gathers that found their unit kept whole since its forward.
  int64_t keptUsed() const { return keptUsed_; }
  /// Frees `function`'s parameters again (the last of nested calls). With
  /// `backwardFollows` (a training forward) and prefetch on, the unit that
  /// backward re-runs first is kept whole instead, until its re-run's gather
  /// takes it or any other gather, drain() or releaseAll() frees it.
  void release(const std::string &function, bool backwardFollows = false);
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
  /// An all-gather in flight into a fresh buffer.
  struct Launch {
    size_t entry = 0;
    at::Tensor src; ///< this rank's range, sent
    at::Tensor fresh;
    WorkPtr work;
  };
  void free(Entry &e);
  /// The buffers of an all-gather of `entry` (no collective yet).
  Launch prepare(size_t entry);
  /// Issues the all-gathers of those without work yet, in order.
  void issue(std::vector<Launch> &launches);
  /// Waits for `l` and gives its buffer to the entry's flat.
  Status install(const Launch &l, const std::string &function);
  Status gatherError(const Entry &e, const std::string &function, const Status &st) const;
  /// The units gathered one after the other in `pass`: learns the order.
  void learn(const std::string &function, Pass pass);
  void endPass(int pass);
  /// Launches the all-gathers of the unit after `function` in `pass`.
  void startPrefetch(const std::string &function, Pass pass);
  /// Frees the unit kept whole after its forward, if any.
  void releaseKept();
  /// release() without keeping.
  void decrement(const std::string &function);
  /// Waits for a prefetch in flight and drops it.
  Status dropPrefetch();

  std::vector<Entry> entries_;
  std::map<std::string, std::vector<size_t>> byFunction_;
  bool prefetch_ = true;
  std::map<std::string, std::string> next_[2]; ///< per pass: the unit gathered after each
  std::string last_[2];                        ///< per pass: the unit gathered last
  std::string firstBackward_;                  ///< the unit backward re-ran first
  std::string kept_;                           ///< a unit whole since its forward ("" none)
  std::string pendingFunction_;                ///< the prefetched unit ("" none)
  std::vector<Launch> pending_;                ///< its all-gathers in flight
  int64_t gathers_ = 0, prefetchesUsed_ = 0, prefetchesDropped_ = 0, keptUsed_ = 0;
};

} // namespace nnsc::rt
