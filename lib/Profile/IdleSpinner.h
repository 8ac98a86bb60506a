#pragma once
// A thread that spins at SCHED_IDLE priority while it lives, so that this
// machine's CPUs never go idle during a measurement. No LibTorch.
//
// Why: on a virtual machine an idle vCPU halts, and waking it for the next
// message can take a host scheduling tick. Measured on the 2-core build VM,
// a Gloo ping-pong of 1 KiB between 2 processes took 25 us one way while the
// CPUs were busy and 2-4 ms (one or two 250 Hz ticks) once both processes
// slept in their waits — changing from point to point. Training keeps the
// CPUs busy between collectives, so the busy figure is the one to plan with.
// SCHED_IDLE runs only when nothing else wants the CPU and yields at once to
// any waking thread, so it takes nothing from the work being timed.

#include <atomic>
#include <thread>

namespace nnsc::profile {

class IdleSpinner {
public:
  /// Starts the spinning thread when `enabled`.
  explicit IdleSpinner(bool enabled);
  /// Stops and joins it.
  ~IdleSpinner();
  IdleSpinner(const IdleSpinner &) = delete;
  IdleSpinner &operator=(const IdleSpinner &) = delete;

private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

} // namespace nnsc::profile
