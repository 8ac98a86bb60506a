// Host allocator settings for training workers (HostMemory.h). No LibTorch.
#include "nnsc/Runtime/HostMemory.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace nnsc::rt {

bool keepFreedHostMemory() {
#if defined(__GLIBC__)
  // Setting either turns off glibc's dynamic threshold, which would
  // otherwise start at 128 KiB and only rise as mmapped blocks are freed.
  constexpr int kMmapThreshold = 32 << 20; // the largest glibc accepts on 64-bit
  bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1 && ok;
  return ok;
#else
  return false;
#endif
}

} // namespace nnsc::rt
