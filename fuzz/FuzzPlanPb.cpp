// Fuzzes plan.pb as `nnsc-plan --print PLAN.pb` and nnsc-codegen read it:
// parse and check the envelope (plan::parsePlan), validate it against the
// seed MLP graph, partition it and print it.
#include <sstream>

#include "FuzzCommon.h"
#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Plan/PlanPrinter.h"
#include "nnsc/Transform/Partition.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto planned = plan::parsePlan(fuzz::bytesOf(data, size), "plan.pb");
  if (!planned) {
    fuzz::checkMessage(planned.status());
    return 0;
  }
  const ir::Graph &graph = fuzz::seedGraph();
  Status st = plan::validatePlan(*planned, graph);
  if (!st) {
    fuzz::checkMessage(st);
    return 0;
  }
  auto parts = transform::partitionGraph(graph, *planned);
  if (!parts) {
    fuzz::checkMessage(parts.status());
    return 0;
  }
  std::ostringstream os;
  plan::printPlan(*planned, graph, os);
  return 0;
}
