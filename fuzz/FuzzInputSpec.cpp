// Fuzzes nnsc-trace's sample-input spec (trace::parseInputSpec): every entry
// it accepts has a known dtype and a size that fits in 64 bits.
#include "FuzzCommon.h"
#include "nnsc/Trace/InputSpec.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto spec = trace::parseInputSpec(fuzz::bytesOf(data, size), "/fuzz/inputs.yaml");
  if (!spec) {
    fuzz::checkMessage(spec.status());
    return 0;
  }
  for (const auto &e : spec->entries) {
    for (int64_t d : e.shape)
      NNSC_FUZZ_CHECK(d >= 0, "input '" + e.name + "' has a negative dim");
  }
  return 0;
}
