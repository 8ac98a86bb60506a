#pragma once
/// What `nnsc-profile-comm` does (docs/profile-comm.md): with --nproc N it
/// checks its flags and supervises N local workers through nnsc-run's
/// launcher (Runtime/Launcher.h); without it, it is one worker of a job
/// placed by the launcher's environment (torchrun, Open MPI, Slurm). The
/// workers time each collective over group and message sizes and rank 0
/// writes the communication table (CommTable.h) atomically. No LibTorch in
/// this header.

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "nnsc/Profile/CommTable.h"
#include "nnsc/Support/Status.h"

namespace nnsc::profile {

/// The command line, as parsed (unchecked).
struct ProfileCommOptions {
  std::string out;                  ///< the table to write (required)
  int nproc = -1;                   ///< -1 = be a worker; else start N workers
  std::string backend = "gloo";     ///< "gloo" (CPU tensors) or "nccl" (CUDA)
  std::string device;               ///< the table's device id; default by backend
  std::string sizes = "1KiB:64MiB"; ///< MIN:MAX[:FACTOR]
  std::string collectives = "all";  ///< comma-separated names or "all"
  int iters = 20;                   ///< timed iterations per point
  int warmup = 5;                   ///< untimed iterations per point
  /// Sweeps over all points, each timing iters/rounds iterations; a point's
  /// figure is its fastest round's median, so that a moment when the machine
  /// was busy elsewhere does not decide a point.
  int rounds = 3;
  /// Timed iterations stop early once a point has run this long (at least
  /// kMinTimedIters run), so large messages on slow links stay affordable.
  double pointSeconds = 0.5;
  double timeoutSeconds = 60; ///< per operation, rendezvous included
  /// Keep the CPUs from idling while measuring (IdleSpinner: a SCHED_IDLE
  /// thread per worker); off measures a machine whose cores sleep in waits.
  bool spin = true;
  /// Milliseconds of matmuls each rank runs before every timed operation, as
  /// a training step computes between its collectives; -1: the backend's
  /// default (gloo 5, nccl 0: back to back). With a gap, a point's figure is
  /// the mean of its timed operations (what a step pays) and the median
  /// round's.
  double gapMs = -1;
  std::vector<std::string> argv; ///< the command line, for the workers
};

/// Timed iterations a point always gets, whatever its time budget.
constexpr int kMinTimedIters = 5;

/// The checked options a worker runs.
struct CommPlan {
  std::string out, backend, device;
  std::vector<Collective> collectives;
  std::vector<int64_t> sizes; ///< requested message sizes in bytes, ascending
  int iters = 20, warmup = 5, rounds = 3;
  double pointSeconds = 0.5;
  std::chrono::milliseconds timeout{60000};
  bool spin = true;
  double gapMs = 0; ///< ProfileCommOptions::gapMs, resolved
};

/// Checks the options (every error names the flag and the value). Does not
/// touch the output file.
Expected<CommPlan> checkCommOptions(const ProfileCommOptions &options);

/// "64MiB" -> 67108864. Accepts a non-negative integer with an optional unit
/// B, KiB, MiB or GiB (also K, M, G and KB, MB, GB, read as binary units).
Expected<int64_t> parseByteSize(const std::string &text);

/// "MIN:MAX[:FACTOR]" -> MIN, MIN*FACTOR, ... up to MAX (inclusive when it
/// falls on the ladder). FACTOR defaults to 4; MIN >= 4 bytes.
Expected<std::vector<int64_t>> parseSizeLadder(const std::string &text);

/// The group sizes measured in a world of `worldSize` ranks: every power of
/// two from 2 up to worldSize, and worldSize itself.
std::vector<int> groupSizes(int worldSize);

/// Float32 elements one rank's buffer holds for a message of `bytes` on a
/// group of `group`: bytes / 4 rounded down to a multiple of `group`, at
/// least `group` (collectives that split the buffer need equal parts).
int64_t messageElements(int64_t bytes, int group);

/// Fails unless a file can be created at `path` (its directory exists and is
/// writable, and `path` is not a directory); the error names the path.
Status checkWritable(const std::string &path);

/// Runs the command; returns the exit code (0 ok, 1 bad input, 2 internal
/// error or a failed worker).
int profileCommCommand(const ProfileCommOptions &options, std::ostream &out, std::ostream &err);

} // namespace nnsc::profile
