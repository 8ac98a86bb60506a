// CUDA allocator peaks (CudaMemory.h): built only against a CUDA LibTorch.
#include "nnsc/Runtime/CudaMemory.h"

#include <c10/cuda/CUDACachingAllocator.h>

namespace nnsc::rt {

bool cudaMemoryStatsAvailable() { return true; }

void resetCudaPeakBytes(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

int64_t cudaPeakBytes(int device) {
  auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].peak; // 0: the aggregate over pool types
}

} // namespace nnsc::rt
