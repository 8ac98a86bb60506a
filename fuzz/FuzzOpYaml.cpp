// Fuzzes the user op annotations YAML (OpRegistry::loadUserYamlText,
// `nnsc-trace --custom-ops`): parse into a fresh registry.
#include "FuzzCommon.h"
#include "nnsc/Ops/OpRegistry.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ops::OpRegistry registry;
  Status st = registry.loadUserYamlText(fuzz::bytesOf(data, size), "/fuzz/ops.yaml");
  if (!st)
    fuzz::checkMessage(st);
  return 0;
}
