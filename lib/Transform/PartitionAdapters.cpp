// Adapters: forward RVD plans turned into differentiable nnsc.* calls whose
// backward delivers the gradients each side expects (PartitionAdapters.h).
#include "PartitionAdapters.h"

#include <algorithm>
#include <optional>

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

// A local view of the piece (no communication): in and out of the blocked
// view of interleaved layouts.
CommOp reshapeTo(const ir::Shape &shape) {
  CommOp op;
  op.op = "reshape";
  op.outShape = shape;
  return op;
}

// Per dim, the block count both layouts can be viewed with: a layout with D
// count 1 on a dim takes the other's; nullopt when both cut a dim with
// different block counts.
std::optional<std::vector<int64_t>> commonBlocks(const RvdLayout &a, const RvdLayout &b) {
  std::vector<int64_t> out;
  for (int k = 0; k < a.rank(); ++k) {
    auto dim = static_cast<size_t>(k);
    int64_t ba = a.blocks()[dim], bb = b.blocks()[dim];
    bool cutA = a.d()[dim] > 1, cutB = b.d()[dim] > 1;
    if (ba != bb && cutA && cutB)
      return std::nullopt;
    out.push_back(cutA ? ba : bb);
  }
  return out;
}

// `consumer` with every dim that `producer` cuts in other blocks gathered:
// those D counts move into R. Both layouts convert to it without conflict.
Expected<RvdLayout> gatheredWhereBlocksDiffer(const RvdLayout &producer,
                                              const RvdLayout &consumer) {
  std::vector<int64_t> counts = consumer.counts(), blocks = consumer.blocks();
  for (int k = 0; k < consumer.rank(); ++k) {
    auto dim = static_cast<size_t>(k);
    if (producer.d()[dim] > 1 && consumer.d()[dim] > 1 &&
        producer.blocks()[dim] != consumer.blocks()[dim]) {
      counts[kAxisR] *= counts[static_cast<size_t>(axisOfDim(k))];
      counts[static_cast<size_t>(axisOfDim(k))] = 1;
      blocks[dim] = 1;
    }
  }
  auto mid = RvdLayout::fromCounts(consumer.shape(), counts, consumer.devices());
  if (!mid)
    return mid.status();
  return mid->withBlocks(blocks);
}

// Builds the ops of one search from `from` to `to` (which agree on blocks:
// commonBlocks) into `a`; `last`: the adapter ends here, so an all_gather at
// its end may sum the consumers' partial gradients. Sets partialAtEnd.
Status addPhase(const RvdLayout &from, const RvdLayout &to, bool last, const EdgeGrad &grad,
                const RvdSearchOptions &options, Adapter &a, bool &partialAtEnd) {
  std::vector<int64_t> blocks = *commonBlocks(from, to);
  auto src = from.expandedBy(blocks);
  auto dst = to.expandedBy(blocks);
  if (!src || !dst)
    return !src ? src.status() : dst.status();
  auto plan = searchRvdPlan(*src, *dst, options);
  if (!plan)
    return plan.status();
  partialAtEnd = last && gatherTakesPartial(*plan, *dst, grad);
  bool viewed = from.interleaved() || to.interleaved();
  if (viewed && !plan->steps.empty())
    a.ops.push_back(reshapeTo(src->pieceShape()));
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const RvdStep &step = plan->steps[i];
    CommOp op = commOpOf(step);
    // Whole gradients reach a gathered tensor unless it is the last step and
    // its consumers' partial gradients are exactly what reduce_scatter sums
    // (tensors without gradients take the same op: its backward never runs).
    if (step.kind == Primitive::AllGather && !(i + 1 == plan->steps.size() && partialAtEnd)) {
      op.op = "all_gather_split";
      op.backward = Primitive::Chunk;
    }
    a.ops.push_back(std::move(op));
  }
  if (viewed && !plan->steps.empty())
    a.ops.push_back(reshapeTo(to.pieceShape()));
  a.forward.steps.insert(a.forward.steps.end(), plan->steps.begin(), plan->steps.end());
  a.forward.cost += plan->cost;
  return Status::ok();
}

} // namespace

Expected<Adapter> buildAdapter(int64_t tensor, const RvdLayout &producer, const RvdLayout &consumer,
                               const EdgeGrad &grad, const RvdSearchOptions &options) {
  Adapter a;
  a.tensor = tensor;
  a.producer = producer;
  a.consumer = consumer;
  a.needsGrad = grad.needsGrad;
  a.forward.producer = producer;
  a.forward.consumer = consumer;
  bool partialAtEnd = false;
  if (commonBlocks(producer, consumer)) {
    NNSC_RETURN_IF_ERROR(addPhase(producer, consumer, true, grad, options, a, partialAtEnd));
  } else {
    // Cut in different blocks on some dim: gather that dim, then cut it anew.
    auto mid = gatheredWhereBlocksDiffer(producer, consumer);
    if (!mid)
      return mid.status();
    NNSC_RETURN_IF_ERROR(addPhase(producer, *mid, false, grad, options, a, partialAtEnd));
    NNSC_RETURN_IF_ERROR(addPhase(*mid, consumer, true, grad, options, a, partialAtEnd));
  }
  bool direct = a.forward.steps.empty();
  if (grad.needsGrad && grad.consumerPartial && !partialAtEnd && !(direct && grad.keepPartial))
    a.ops.push_back(sumPartialGrads(consumer));
  return a;
}

} // namespace nnsc::transform
