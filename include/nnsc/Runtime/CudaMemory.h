#pragma once
/// Peak memory of the CUDA caching allocator, and a device-wide wait, where the LibTorch has CUDA
/// (lib/Runtime/CudaMemory.cpp is built only against a LibTorch with
/// libc10_cuda; elsewhere these report "not measured").

#include <cstdint>

namespace nnsc::rt {

/// Whether this build can read the CUDA allocator's statistics.
bool cudaMemoryStatsAvailable();

/// Starts a new peak on `device` (resetPeakStats). No-op without CUDA.
void resetCudaPeakBytes(int device);

/// The largest bytes allocated by the caching allocator on `device` since
/// the last reset; -1 without CUDA.
int64_t cudaPeakBytes(int device);

/// Waits for every stream of `device` (cudaDeviceSynchronize). No-op
/// without CUDA.
void synchronizeCudaDevice(int device);

} // namespace nnsc::rt
