#pragma once
/// Cost of one RVD step, as a pluggable function of plain numbers.
///
/// `bytesPerDevice` is the larger of a device's piece before and after the
/// step: the gathered output of all_gather, the unreduced input of
/// reduce_scatter, the buffer of all_reduce and all_to_all. With that size
/// the usual ring formulas give the bytes each device sends as
/// busFactor(kind, n) * bytesPerDevice.

#include <cstdint>
#include <functional>

#include "nnsc/Transform/RvdLayout.h"
#include "nnsc/Transform/RvdPrimitive.h"

namespace nnsc::transform {

/// The cost (any unit; the search minimises the sum) of running `kind` once
/// on every group of `groupSize` devices in parallel, each device holding
/// `bytesPerDevice` as above.
using RvdCostFn = std::function<double(Primitive kind, int64_t bytesPerDevice, int groupSize)>;

/// Fraction of bytesPerDevice each device sends: all_reduce 2(n-1)/n;
/// all_gather, reduce_scatter and all_to_all (n-1)/n; local primitives 0.
double busFactor(Primitive kind, int groupSize);

/// Alpha-beta model in seconds: latency + busFactor * bytes / bandwidth for
/// a collective, 0 for a local primitive.
struct AlphaBetaCost {
  double latencySeconds = 5e-6;
  double bytesPerSecond = 100e9;
  double operator()(Primitive kind, int64_t bytesPerDevice, int groupSize) const;
};

/// AlphaBetaCost{} as an RvdCostFn.
RvdCostFn defaultRvdCost();

/// bytesPerDevice of a step from `before` to `after` for elements of
/// `elementBytes` bytes.
int64_t stepBytes(const RvdLayout &before, const RvdLayout &after, int64_t elementBytes);

} // namespace nnsc::transform
