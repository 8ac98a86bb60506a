#pragma once
/// nnsc-trace as a library: TorchScript archive + sample inputs → graph IR
/// (+ the full weights under their original state_dict names).
///
/// The archive's forward is inlined and executed node by node on sample
/// inputs (on the meta device by default: shapes without memory or FLOPs).
/// Non-tensor computations (sizes, shape arithmetic) are folded into
/// constant arguments, ops that return their input unchanged are dropped,
/// in-place ops become out-of-place ones (SSA; writes through views reach
/// their base and buffer writes become state updates), and every node keeps
/// its module path, module class and source location. The trace then checks
/// itself against LibTorch running the archive (TraceOptions::verify).

#include <ostream>
#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

struct TraceOptions {
  std::string modelPath;       ///< TorchScript archive (torch.jit.trace/script + save)
  std::string inputsPath;      ///< sample-input spec (InputSpec.h)
  std::string device = "meta"; ///< "meta" or "cpu"
  std::string customOps;       ///< optional YAML of user op annotations and libraries
  uint64_t seed = 0;           ///< for random sample inputs in cpu mode
  /// The self-check (SelfCheck.h): Auto runs it when the archive has real
  /// weights of at most kSelfCheckAutoBytes; On insists (an archive of meta
  /// weights is then an error); Off skips it.
  enum class Verify { Auto, On, Off } verify = Verify::Auto;
};

/// Largest parameter + buffer footprint the self-check runs on by default.
inline constexpr int64_t kSelfCheckAutoBytes = int64_t{1} << 30;

struct TraceResult {
  ir::Graph graph;
  /// One line per op left replicate-only: "op (first at file:line, N nodes)".
  std::vector<std::string> warnings;
  bool weightsAvailable = false; ///< false when the archive holds meta tensors
  /// What the self-check did: its summary, or why it did not run.
  std::string selfCheck;
};

/// Traces the model. Does not write anything.
Expected<TraceResult> traceModel(const TraceOptions &options);

/// Writes OUTDIR/graph.pb and (when available) OUTDIR/weights.safetensors for
/// the model at `options.modelPath`, re-reading the archive for the weights.
/// Nothing is left in `outDir` on failure.
Status writeTraceOutputs(const TraceOptions &options, const TraceResult &result,
                         const std::string &outDir);

/// What `nnsc-trace` does: trace, write OUTDIR (if not empty), print the
/// graph's text form to `out` if asked, and report warnings and the weights
/// situation on `log`.
Status runTrace(const TraceOptions &options, const std::string &outDir, bool print,
                std::ostream &out, std::ostream &log);

/// `nnsc-trace --print graph.pb`: the text form of a written graph.
Status printGraphFile(const std::string &path, std::ostream &out);

} // namespace nnsc::trace
