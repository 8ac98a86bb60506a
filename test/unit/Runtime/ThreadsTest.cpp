// setIntraOpThreads reaches OpenBLAS's own pool, where one is loaded.
// LibTorch before Catch2, so Catch2's CHECK wins (CommTestUtil.h says why).
#include <ATen/Parallel.h>

#include <dlfcn.h>

#include "../CatchCompat.h"

#include "nnsc/Runtime/Threads.h"

TEST_CASE("threads: LibTorch's and OpenBLAS's pools both follow the setting", "[runtime]") {
  int before = at::get_num_threads();
  nnsc::rt::setIntraOpThreads(1);
  CHECK(at::get_num_threads() == 1);
  using GetThreads = int (*)();
  if (void *fn = dlsym(RTLD_DEFAULT, "openblas_get_num_threads")) // Debian's OpenBLAS
    CHECK(reinterpret_cast<GetThreads>(fn)() == 1);
  nnsc::rt::setIntraOpThreads(before);
}
