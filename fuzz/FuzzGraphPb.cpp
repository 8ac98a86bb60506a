// Fuzzes graph.pb as nnsc-plan reads it: parse and check (ir::parseGraph),
// print it, then plan it with the main job's policy (dp over 2 ranks) and
// partition the plan, as the tool does before writing plan.pb.
#include "FuzzCommon.h"
#include "nnsc/IR/Printer.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Transform/Partition.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto graph = ir::parseGraph(fuzz::bytesOf(data, size), "graph.pb");
  if (!graph) {
    fuzz::checkMessage(graph.status());
    return 0;
  }
  (void)ir::printGraph(*graph);
  (void)plan::graphFingerprint(*graph);
  plan::PlanOptions options;
  options.policy = "dp";
  options.runtimeNgpus = 2;
  auto planned = plan::makePlan(*graph, options);
  if (!planned) {
    fuzz::checkMessage(planned.status());
    return 0;
  }
  auto parts = transform::partitionGraph(*graph, *planned);
  if (!parts)
    fuzz::checkMessage(parts.status());
  return 0;
}
