#pragma once
// The differentiable communication that turns a producer's layout into a
// consumer's (private to nnsc_transform; the conventions are in Partition.h).

#include <cstdint>

#include "nnsc/Support/Status.h"
#include "nnsc/Transform/Partition.h"

namespace nnsc::transform {

/// What the backward of an edge must deliver.
struct EdgeGrad {
  /// The tensor carries a gradient (floating point, downstream of a
  /// trainable parameter); otherwise backward pairs do not matter.
  bool needsGrad = false;
  /// The consumer's parts hold partial gradients of the piece they read
  /// (a split node reading an input whole).
  bool consumerPartial = false;
  /// The producer accepts partial gradients when no step is needed (a
  /// parameter whose reducer sums them).
  bool keepPartial = false;
};

/// The adapter from `producer` to `consumer` for `tensor` (readers left
/// empty). Its `ops` are empty when nothing needs to run, in either
/// direction. Errors: the RVD search failing (different device sets, ...).
Expected<Adapter> buildAdapter(int64_t tensor, const RvdLayout &producer, const RvdLayout &consumer,
                               const EdgeGrad &grad, const RvdSearchOptions &options);

} // namespace nnsc::transform
