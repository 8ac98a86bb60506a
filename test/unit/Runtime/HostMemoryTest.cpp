// keepFreedHostMemory: what a step frees stays in the process, so the next
// step does not page-fault the same memory in again.
#include <cstdlib>
#include <vector>

#include <sys/resource.h>

#include "../CatchCompat.h"

#include "nnsc/Runtime/HostMemory.h"

#if defined(__SANITIZE_ADDRESS__)
#define NNSC_OWN_MALLOC 1 // AddressSanitizer replaces malloc: mallopt means nothing there
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNSC_OWN_MALLOC 1
#endif
#endif

namespace {

long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Page faults of `rounds` "steps" after a first one: each allocates 16 blocks
// of 4 MiB (64 MiB, as a step's activations), writes every page, frees all.
long faultsOfSteps(int rounds) {
  constexpr size_t kBlock = size_t(4) << 20, kBlocks = 16;
  long before = 0;
  for (int round = 0; round <= rounds; ++round) {
    if (round == 1)
      before = minorFaults();
    std::vector<void *> blocks;
    for (size_t b = 0; b < kBlocks; ++b) {
      auto *p = static_cast<volatile char *>(std::malloc(kBlock));
      if (p == nullptr)
        FAIL("malloc of 4 MiB failed");
      for (size_t i = 0; i < kBlock; i += 4096)
        p[i] = char(round);
      blocks.push_back(const_cast<char *>(p));
    }
    for (void *p : blocks)
      std::free(p);
  }
  return minorFaults() - before;
}

} // namespace

TEST_CASE("host memory: freed blocks stay for the next step once kept", "[runtime]") {
#if defined(__GLIBC__) && !defined(NNSC_OWN_MALLOC)
  // glibc's defaults: the heap past its trim threshold goes back to the
  // kernel after every step, and every page faults in again (4 x 16384).
  long returned = faultsOfSteps(4);
  REQUIRE(nnsc::rt::keepFreedHostMemory());
  long kept = faultsOfSteps(4);
  INFO("page faults over 4 steps: " << returned << " with glibc's defaults, " << kept
                                    << " kept");
  CHECK(returned > 30000);
  CHECK(kept < 2000);
#else
  SUCCEED("glibc's malloc only: this build's malloc is another, mallopt does not reach it");
#endif
}
