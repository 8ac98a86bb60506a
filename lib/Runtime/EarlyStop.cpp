// EarlyStop (EarlyStop.h): a signal handler that only records, and the
// agreement over the ranks at the end of a step.
#include "EarlyStop.h"

#include <atomic>

#include <ATen/ATen.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::rt {

namespace {

// Set by the handler on whichever thread the signal lands, read by the
// training thread: a lock-free atomic is both async-signal-safe and visible
// across threads.
std::atomic<int> gEarlyStopSeen{0};
static_assert(std::atomic<int>::is_always_lock_free);

void onEarlyStopSignal(int) { gEarlyStopSeen = 1; }

int stopSignalNumber(const std::string &name) {
  if (name == "SIGTERM")
    return SIGTERM;
  if (name == "SIGINT")
    return SIGINT;
  if (name == "SIGUSR1")
    return SIGUSR1;
  if (name == "SIGUSR2")
    return SIGUSR2;
  return 0; // none (the config admits no other value)
}

} // namespace

EarlyStop::EarlyStop(const std::string &signalName, double limitMinutes)
    : signal_(stopSignalNumber(signalName)), signalName_(signalName),
      limitSeconds_(limitMinutes * 60) {
  if (!signal_)
    return;
  gEarlyStopSeen = 0;
  struct sigaction sa {};
  sa.sa_handler = onEarlyStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; // a read or write it interrupts goes on
  ::sigaction(signal_, &sa, &previous_);
}

EarlyStop::~EarlyStop() {
  if (signal_)
    ::sigaction(signal_, &previous_, nullptr);
}

Expected<std::string> EarlyStop::agree(CommBackend &world, const c10::Device &device,
                                       double elapsedSeconds) const {
  // What this rank asks: [its signal seen, the time limit passed (rank 0)].
  const bool bySignal = signal_ && gEarlyStopSeen;
  const bool byTime = limitSeconds_ > 0 && world.rank() == 0 && elapsedSeconds >= limitSeconds_;
  // On the group's device: NCCL reduces CUDA tensors only.
  std::vector<at::Tensor> asks{at::tensor({bySignal ? 1.f : 0.f, byTime ? 1.f : 0.f})};
  asks[0] = asks[0].to(device);
  Status st = world.allReduce(asks, ReduceOp::Max)->wait();
  if (!st.isOk())
    return st.withContext("agreeing whether to stop early");
  at::Tensor all = asks[0].cpu();
  std::vector<std::string> why;
  if (all[0].item<float>() > 0)
    why.push_back(fmt::format("on {} (checkpoint.on_signal)", signalName_));
  if (all[1].item<float>() > 0)
    why.push_back(fmt::format("at train.time_limit_minutes ({:g}) on rank 0", limitSeconds_ / 60));
  return fmt::format("{}", fmt::join(why, " and "));
}

} // namespace nnsc::rt
