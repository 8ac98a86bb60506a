// Fuzzes the safetensors reader (SafetensorsFile::fromBytes, the checks of
// SafetensorsFile::open): every entry it accepts lies inside the file and
// has exactly the bytes its dtype and shape say.
#include "FuzzCommon.h"
#include "nnsc/Support/Safetensors.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes = fuzz::bytesOf(data, size);
  auto file = SafetensorsFile::fromBytes(bytes, "rank0.safetensors");
  if (!file) {
    fuzz::checkMessage(file.status());
    return 0;
  }
  for (const SafetensorsEntry &e : (*file)->entries()) {
    int64_t n = safetensorsElementSize(e.dtype);
    for (int64_t d : e.shape)
      n *= d; // no overflow: the reader refuses shapes whose bytes pass 64 bits
    NNSC_FUZZ_CHECK(n == static_cast<int64_t>(e.bytes.size()), "entry '" + e.name + "'");
    NNSC_FUZZ_CHECK((*file)->find(e.name) != nullptr, "entry '" + e.name + "'");
  }
  return 0;
}
