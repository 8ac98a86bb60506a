#include "IdleSpinner.h"

#include <pthread.h>
#include <sched.h>

namespace nnsc::profile {

IdleSpinner::IdleSpinner(bool enabled) {
  if (!enabled)
    return;
  thread_ = std::thread([this] {
    sched_param param{};
    // If the policy cannot be set, do not spin at normal priority: that would
    // steal time from the workers.
    if (::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &param) != 0)
      return;
    while (!stop_.load(std::memory_order_relaxed)) {
    }
  });
}

IdleSpinner::~IdleSpinner() {
  stop_ = true;
  if (thread_.joinable())
    thread_.join();
}

} // namespace nnsc::profile
