#pragma once
/// What `nnsc-profile-device` does (docs/profile-comm.md): measures this
/// machine's device — peak matmul FLOP/s per dtype, memory bandwidth, the
/// launch floor — with LibTorch, using the threads a training worker would
/// use, and writes a device spec (configs/devices/*.yaml format). With
/// --nproc N it supervises N local workers that measure at the same time, as N
/// training workers would run; the slowest worker's figures are written. No
/// LibTorch in this header.

#include <iosfwd>
#include <string>
#include <vector>

namespace nnsc::profile {

struct ProfileDeviceOptions {
  std::string out;            ///< the device spec to write (required)
  std::string device = "cpu"; ///< "cpu" or "cuda" (the worker's local rank)
  std::string name;           ///< the spec's name; default "cpu-local" / "cuda-local"
  int nproc = -1;             ///< -1 = be a worker; else start N workers
  /// Intra-op threads per worker; 0 = nnsc-run's rule: the cores divided by
  /// the workers on this node (LOCAL_WORLD_SIZE), at least 1.
  int threads = 0;
  std::string dtypes;            ///< comma-separated; default float32,bfloat16 (+float16 on cuda)
  double seconds = 0.3;          ///< time budget of each measured size
  std::vector<std::string> argv; ///< the command line, for the workers
};

/// Runs the command; returns the exit code (0 ok, 1 bad input, 2 internal
/// error or a failed worker).
int profileDeviceCommand(const ProfileDeviceOptions &options, std::ostream &out, std::ostream &err);

} // namespace nnsc::profile
