#pragma once
// Stopping a run early with a checkpoint, on every rank at the same step:
// on the signal checkpoint.on_signal names (sent to any rank), or once rank 0
// has passed train.time_limit_minutes. Megatron's --exit-signal-handler and
// --exit-duration-in-mins.

#include <csignal>
#include <string>

#include <c10/core/Device.h>

#include "nnsc/Runtime/Comm.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

class EarlyStop {
public:
  /// `signalName`: none | SIGTERM | SIGINT | SIGUSR1 | SIGUSR2, caught for
  /// this object's lifetime (the previous handler is put back after);
  /// `limitMinutes`: 0 for none.
  EarlyStop(const std::string &signalName, double limitMinutes);
  ~EarlyStop();
  EarlyStop(const EarlyStop &) = delete;
  EarlyStop &operator=(const EarlyStop &) = delete;

  /// Whether a signal or a time limit is set: only then does agree() talk.
  bool enabled() const { return signal_ != 0 || limitSeconds_ > 0; }
  /// Whether to stop after this step, the same answer on every rank: one
  /// all-reduce (max) over `world` of what this rank asks (its signal seen;
  /// on rank 0, `elapsedSeconds` past the limit), on `device`. The reason,
  /// for the log line ("" to go on).
  Expected<std::string> agree(CommBackend &world, const c10::Device &device,
                              double elapsedSeconds) const;

private:
  int signal_ = 0;
  std::string signalName_;
  double limitSeconds_ = 0;
  struct sigaction previous_ {};
};

} // namespace nnsc::rt
