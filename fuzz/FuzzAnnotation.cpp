// Fuzzes the dimops annotation grammar (ops::parseCandidates): any text
// parses or fails with a message, and what parses prints a canonical text
// that parses back to the same annotation.
#include "FuzzCommon.h"
#include "nnsc/Ops/Annotation.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text = fuzz::bytesOf(data, size);
  auto candidates = ops::parseCandidates(text);
  if (!candidates) {
    fuzz::checkMessage(candidates.status());
    return 0;
  }
  for (const ops::OpAnno &anno : *candidates) {
    std::string canonical = anno.text();
    auto again = ops::parseAnnotation(canonical);
    NNSC_FUZZ_CHECK(again, "'" + canonical + "' does not parse: " + again.status().message());
    NNSC_FUZZ_CHECK(*again == anno, "'" + canonical + "' parses to another annotation");
  }
  // The same text as found in a file (the op YAML's path): positions shift.
  auto located = ops::parseAnnotation(text, SourcePos{"ops.yaml", 3, 7});
  if (!located)
    fuzz::checkMessage(located.status());
  return 0;
}
