#pragma once
// The worker of nnsc-profile-device (DeviceBench.cpp, LibTorch).

#include <iosfwd>
#include <string>
#include <vector>

#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Support/Status.h"

namespace nnsc::profile {

/// The checked options of nnsc-profile-device.
struct DevicePlan {
  std::string out, device, name; ///< device: "cpu" or "cuda"
  int threads = 0;               ///< 0 = cores / workers on this node
  std::vector<std::string> dtypes;
  double seconds = 0.3;
};

/// Measures the device (every worker of the job at once, each with its
/// threads) and on rank 0 writes the spec to plan.out and a summary to `out`;
/// the figures are the slowest worker's.
Status runDeviceWorker(const DevicePlan &plan, const rt::LaunchEnv &env, std::ostream &out);

} // namespace nnsc::profile
