// CUDA device facts for nnsc-profile-device; built against the CUDA runtime
// when the toolkit was found, else every answer is "unknown".
#include "CudaInfo.h"

#ifdef NNSC_HAVE_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace nnsc::profile {

#ifdef NNSC_HAVE_CUDA_RUNTIME

int64_t cudaMemoryBytes(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess)
    return 0;
  return int64_t(prop.totalGlobalMem);
}

std::string cudaDeviceName(int index) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index) != cudaSuccess)
    return "";
  return prop.name;
}

#else

int64_t cudaMemoryBytes(int) { return 0; }
std::string cudaDeviceName(int) { return ""; }

#endif

} // namespace nnsc::profile
