#pragma once
// Progress lines and metrics records of the trainer (no LibTorch).

#include <cstdint>
#include <optional>
#include <string>

namespace nnsc::rt {

struct StepRecord {
  int64_t step = 0;  ///< steps completed (1-based in the log)
  int64_t steps = 0; ///< train.steps
  double loss = 0, lr = 0, gradNorm = 0, tokensPerS = 0;
  double stepSeconds = 0; ///< wall time of this step alone
  /// Wall time from the start of this process's training loop to the end of
  /// this step (its validation included): what time-to-loss comparisons read.
  double elapsedSeconds = 0;
  double etaSeconds = 0;
  /// Where a CPU step's time went (set on cpu only: on cuda the host runs
  /// ahead of the kernels, so host wall times do not split the step):
  /// forward and backward of every micro-batch, the collectives inside
  /// them (nnsc.* ops; part of the former), the wait for the gradient
  /// reducers after the last backward, and the rest (clipping, optimizer).
  std::optional<double> fwdBwdSeconds, commSeconds, gradSyncSeconds, optimizerSeconds;
  std::optional<double> valLoss;
  std::optional<double> lossScale; ///< fp16: the scale the step's backward used
  bool skipped = false;            ///< fp16: gradients overflowed, no update
  bool profiled = false;           ///< LibTorch's profiler recorded it (slower)
};

/// "step 40/200 | loss 2.4312 | lr 9.8e-04 | grad-norm 0.842 | 11,204 tok/s | eta 0:01:23"
std::string formatProgressLine(const StepRecord &r);

/// "step 40/200 | val loss 2.1034"
std::string formatValidationLine(const StepRecord &r);

/// One JSON object: {"step", "loss", "lr", "grad_norm", "tokens_per_s",
/// "step_s", "elapsed_s"[, "fwd_bwd_s", "comm_s", "grad_sync_s", "optimizer_s"][, "val_loss"]
/// [, "loss_scale"][, "skipped"][, "profiled"]}.
std::string formatMetricsRecord(const StepRecord &r);

/// 11204.3 -> "11,204".
std::string withThousands(double value);

/// 83 -> "0:01:23".
std::string formatDuration(double seconds);

/// Keeps the records of steps <= `step` in the metrics file at `path` (a
/// resumed run rewrites what the interrupted one logged after its
/// checkpoint); a missing file is fine.
void truncateMetrics(const std::string &path, int64_t step);
/// True when the metrics file at `path` holds a record of a step after `step` (one that
/// truncateMetrics would drop).
bool metricsBeyond(const std::string &path, int64_t step);

} // namespace nnsc::rt
