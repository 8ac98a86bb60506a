// CUDA allocator peaks (CudaMemory.h): built only against a CUDA LibTorch.
#include "nnsc/Runtime/CudaMemory.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>

namespace nnsc::rt {

bool cudaMemoryStatsAvailable() { return true; }

void resetCudaPeakBytes(int device) {
  // The caching allocator sets a device up on the first CUDA use there; before
  // it resetPeakStats fails ("Invalid device argument 0: did you call init?"),
  // and this runs before anything else touches the GPU. An empty tensor on the
  // device is that first use, without allocating.
  auto index = static_cast<c10::DeviceIndex>(device);
  (void)at::empty({0}, at::TensorOptions().device(at::kCUDA, index));
  c10::cuda::CUDACachingAllocator::resetPeakStats(index);
}

int64_t cudaPeakBytes(int device) {
  auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[0].peak; // 0: the aggregate over pool types
}

void synchronizeCudaDevice(int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::device_synchronize();
}

} // namespace nnsc::rt
