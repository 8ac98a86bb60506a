// Fuzzes user plan files (docs/plan-files.md) as `nnsc-plan --policy file
// --runtime-ngpus 2` reads them: parse, apply to the seed MLP graph (with
// its pipeline stages when it has `stages:`), then
// validate and partition the plan as the tool does before writing it.
#include "FuzzCommon.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Plan/PlanFile.h"
#include "nnsc/Transform/Partition.h"

using namespace nnsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto file = plan::parsePlanFile(fuzz::bytesOf(data, size), "plan.yaml");
  if (!file) {
    fuzz::checkMessage(file.status());
    return 0;
  }
  const int runtimeNgpus = 2;
  int n = file->planNgpus > 0 ? file->planNgpus : runtimeNgpus;
  if (runtimeNgpus % n != 0) // makeFromPlanFile refuses it before applying
    return 0;
  const ir::Graph &graph = fuzz::seedGraph();
  auto planned = file->stages.empty() ? plan::applyPlanFile(graph, *file, n, runtimeNgpus)
                                      : plan::applyStagedPlanFile(graph, *file, n, runtimeNgpus);
  if (!planned) {
    fuzz::checkMessage(planned.status());
    return 0;
  }
  // As makePlan: the common fields, then the check whose failure is an
  // internal error (exit 2) there.
  planned->set_format_version(plan::kPlanFormatVersion);
  planned->set_graph_fingerprint(plan::graphFingerprint(graph));
  planned->set_micro_batches(file->microBatches > 0 ? file->microBatches : 1);
  Status st = plan::validatePlan(*planned, graph);
  NNSC_FUZZ_CHECK(st, "a plan file gave an invalid plan: " + st.message());
  auto parts = transform::partitionGraph(graph, *planned);
  if (!parts)
    fuzz::checkMessage(parts.status());
  return 0;
}
