// Adapters: forward RVD plans turned into differentiable nnsc.* calls whose
// backward delivers the gradients each side expects (PartitionAdapters.h).
#include "PartitionAdapters.h"

#include <algorithm>

#include "PartitionLayouts.h"
#include "nnsc/Transform/RvdAutograd.h"

namespace nnsc::transform {

namespace {

std::vector<std::vector<int>> sortedGroups(std::vector<std::vector<int>> groups) {
  for (std::vector<int> &g : groups)
    std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

// True when the last step is an all_gather over exactly the devices whose
// consumer gradients are partial: its reduce_scatter backward then sums them.
bool gatherTakesPartial(const RvdPlan &plan, const RvdLayout &consumer, const EdgeGrad &grad) {
  if (!grad.needsGrad || !grad.consumerPartial || plan.steps.empty())
    return false;
  const RvdStep &last = plan.steps.back();
  return last.kind == Primitive::AllGather &&
         sortedGroups(last.groups) == sortedGroups(replicaGroups(consumer));
}

CommOp commOpOf(const RvdStep &step) {
  DifferentiableOp d = differentiableOp(step);
  CommOp op;
  op.op = d.op;
  op.args = d.args;
  op.forward = d.forward;
  op.backward = d.backward;
  op.groups = step.groups;
  op.outShape = step.after.pieceShape();
  return op;
}

// Megatron's f: identity forward, all_reduce of the partial gradients backward.
CommOp sumPartialGrads(const RvdLayout &consumer) {
  CommOp op;
  op.op = "identity_all_reduce";
  op.forward = Primitive::Identity;
  op.backward = Primitive::AllReduce;
  op.groups = replicaGroups(consumer);
  op.outShape = consumer.pieceShape();
  return op;
}

} // namespace

Expected<Adapter> buildAdapter(int64_t tensor, const RvdLayout &producer, const RvdLayout &consumer,
                               const EdgeGrad &grad, const RvdSearchOptions &options) {
  auto plan = searchRvdPlan(producer, consumer, options);
  if (!plan)
    return plan.status();
  Adapter a;
  a.tensor = tensor;
  a.producer = producer;
  a.consumer = consumer;
  a.forward = plan.take();
  a.needsGrad = grad.needsGrad;
  bool partialAtEnd = gatherTakesPartial(a.forward, consumer, grad);
  for (size_t i = 0; i < a.forward.steps.size(); ++i) {
    const RvdStep &step = a.forward.steps[i];
    if (step.kind == Primitive::ValueSplit)
      return Status::internal("a consumer layout asks for partial sums (value_split)");
    CommOp op = commOpOf(step);
    bool last = i + 1 == a.forward.steps.size();
    // Whole gradients reach a gathered tensor unless it is the last step and
    // its consumers' partial gradients are exactly what reduce_scatter sums
    // (tensors without gradients take the same op: its backward never runs).
    if (step.kind == Primitive::AllGather && !(last && partialAtEnd)) {
      op.op = "all_gather_split";
      op.backward = Primitive::Chunk;
    }
    a.ops.push_back(std::move(op));
  }
  bool direct = a.forward.steps.empty();
  if (grad.needsGrad && grad.consumerPartial && !partialAtEnd && !(direct && grad.keepPartial))
    a.ops.push_back(sumPartialGrads(consumer));
  return a;
}

} // namespace nnsc::transform
