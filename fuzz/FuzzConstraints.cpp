// Fuzzes autodist's constraints files (docs/autodist.md) as `nnsc-plan
// --policy autodist --constraints FILE` reads them: parse, then resolve the
// rules against the seed MLP graph; every failure must carry a message.
#include "FuzzCommon.h"
#include "nnsc/Plan/Constraints.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto constraints = plan::parseConstraints(fuzz::bytesOf(data, size), "constraints.yaml");
  if (!constraints) {
    fuzz::checkMessage(constraints.status());
    return 0;
  }
  auto nodes = plan::constrainNodes(fuzz::seedGraph(), *constraints);
  if (!nodes) {
    fuzz::checkMessage(nodes.status());
    return 0;
  }
  NNSC_FUZZ_CHECK(nodes->size() == fuzz::seedGraph().nodes().size(),
                  "one constraint per node");
  return 0;
}
