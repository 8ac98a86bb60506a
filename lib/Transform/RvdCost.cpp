// The default alpha-beta cost of RVD steps.
#include "nnsc/Transform/RvdCost.h"

#include <algorithm>

namespace nnsc::transform {

double busFactor(Primitive kind, int groupSize) {
  if (isLocal(kind) || groupSize <= 1)
    return 0.0;
  double n = groupSize;
  if (kind == Primitive::AllReduce)
    return 2.0 * (n - 1) / n;
  return (n - 1) / n;
}

double AlphaBetaCost::operator()(Primitive kind, int64_t bytesPerDevice, int groupSize) const {
  if (isLocal(kind))
    return 0.0;
  return latencySeconds +
         busFactor(kind, groupSize) * static_cast<double>(bytesPerDevice) / bytesPerSecond;
}

RvdCostFn defaultRvdCost() { return AlphaBetaCost{}; }

int64_t stepBytes(const RvdLayout &before, const RvdLayout &after, int64_t elementBytes) {
  return elementBytes * std::max(before.pieceElements(), after.pieceElements());
}

} // namespace nnsc::transform
