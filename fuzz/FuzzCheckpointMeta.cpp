// Fuzzes a checkpoint's rank{r}.json as nnsc-run (resume) and
// nnsc-merge-ckpt read it (rt::parseCheckpointMeta): what parses writes back
// to a text that parses to the same metadata.
#include "FuzzCommon.h"
#include "nnsc/Runtime/CheckpointMeta.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto meta = rt::parseCheckpointMeta(fuzz::bytesOf(data, size), "rank0.json");
  if (!meta) {
    fuzz::checkMessage(meta.status());
    return 0;
  }
  std::string text = rt::checkpointMetaText(*meta);
  auto again = rt::parseCheckpointMeta(text, "rank0.json");
  NNSC_FUZZ_CHECK(again, "written metadata does not read back: " + again.status().message());
  NNSC_FUZZ_CHECK(rt::checkpointMetaText(*again) == text, "metadata changes on a round trip");
  return 0;
}
