#pragma once
// A CUDA device's name and memory, from the CUDA runtime (CudaInfo.cpp, the
// only file that sees its headers). No LibTorch.

#include <cstdint>
#include <string>

namespace nnsc::profile {

/// Total memory of CUDA device `index` in bytes; 0 when unknown (no CUDA
/// runtime in this build, or the call failed).
int64_t cudaMemoryBytes(int index);

/// The device's name ("NVIDIA H100 80GB HBM3"); "" when unknown.
std::string cudaDeviceName(int index);

} // namespace nnsc::profile
