#pragma once
/// Live bytes of CPU tensor storage, counted by a wrapper around LibTorch's
/// CPU allocator (LibTorch keeps no statistics for CPU memory). For
/// measurements (bench/recompute_memory.sh, the recompute unit test): every
/// CPU allocation made after installation goes through a mutex and a map.

#include <cstdint>

namespace nnsc::rt {

/// Installs the counting allocator as the CPU allocator (once; later calls
/// do nothing). Storage allocated before is not counted, also when freed.
void installCpuAllocationCounter();

/// Bytes of CPU storage allocated since installation and still alive.
int64_t cpuLiveBytes();

/// The largest cpuLiveBytes() since installation or the last resetCpuPeakBytes().
int64_t cpuPeakBytes();

/// Starts a new peak at the current live bytes.
void resetCpuPeakBytes();

} // namespace nnsc::rt
