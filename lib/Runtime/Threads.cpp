// Intra-op threads for LibTorch and OpenBLAS (Threads.h).
#include "nnsc/Runtime/Threads.h"

#include <dlfcn.h>

#include <ATen/Parallel.h>

namespace nnsc::rt {

void setIntraOpThreads(int threads) {
  at::set_num_threads(threads);
  // OpenBLAS exports openblas_set_num_threads; older builds goto_set_num_threads.
  using SetThreads = void (*)(int);
  for (const char *name : {"openblas_set_num_threads", "goto_set_num_threads"}) {
    if (void *fn = dlsym(RTLD_DEFAULT, name)) {
      reinterpret_cast<SetThreads>(fn)(threads);
      return;
    }
  }
}

} // namespace nnsc::rt
