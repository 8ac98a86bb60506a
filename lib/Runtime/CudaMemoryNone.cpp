// CUDA allocator peaks (CudaMemory.h) for a LibTorch without CUDA.
#include "nnsc/Runtime/CudaMemory.h"

namespace nnsc::rt {

bool cudaMemoryStatsAvailable() { return false; }
void resetCudaPeakBytes(int) {}
int64_t cudaPeakBytes(int) { return -1; }
void synchronizeCudaDevice(int) {}

} // namespace nnsc::rt
