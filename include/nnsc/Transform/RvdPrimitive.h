#pragma once
/// The primitive transitions between RVD layouts over one device group.
///
/// A transition takes `chunks` = c out of one axis (fromAxis) and puts it into
/// another (toAxis): the from-count divides by c, the to-count multiplies by
/// c. The devices are split into collective groups of c members that differ
/// only in the from-coordinate: a device at from-index x = q*c + m is member m
/// of its group, and afterwards holds from-index q and to-index y*c + m (y
/// its old to-index); every other coordinate stays. Member m is the rank of
/// the device in its group (the order of RvdStep::groups).
///
///   from -> to   primitive       before (member m holds)      after (member m holds)
///   D_k  -> R    all_gather      chunk m of c along dim k     their concatenation
///   V    -> R    all_reduce      partial m of c               the sum
///   V    -> D_k  reduce_scatter  partial m of c               chunk m along dim k of the sum
///   D_i  -> D_j  all_to_all      chunk m along dim i          chunk m along dim j of the
///                                                             concatenation along dim i
///   R    -> D_k  chunk (local)   a replica                    chunk m along dim k
///   R    -> V    value_split     a replica                    member 0 the value, others
///                (local)                                      zeros (sums back exactly)
///
/// Contiguous chunks are merged and split, so D indices keep their meaning.
/// R and V indices are labels (RvdLayout.h): regroupAxis relabels them to
/// offer other member choices to the search, as nnScaler's inner_transpose.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/Support/Status.h"
#include "nnsc/Transform/RvdLayout.h"

namespace nnsc::transform {

enum class Primitive { AllGather, AllReduce, ReduceScatter, AllToAll, Chunk, ValueSplit, Identity };

/// "all_gather", "all_reduce", "reduce_scatter", "all_to_all", "chunk",
/// "value_split", "identity".
const char *primitiveName(Primitive kind);
/// True when no data leaves a device (chunk, value_split, identity).
bool isLocal(Primitive kind);

/// `chunks` out of `fromAxis` into `toAxis` (axes as in RvdLayout.h).
struct Transition {
  int fromAxis = kAxisR;
  int toAxis = kAxisR;
  int64_t chunks = 1;
  bool operator==(const Transition &o) const {
    return fromAxis == o.fromAxis && toAxis == o.toAxis && chunks == o.chunks;
  }
};

/// The primitive that moves a count from `fromAxis` to `toAxis`, or an error
/// for pairs none does (D -> V, anything -> itself, ...).
Expected<Primitive> primitiveFor(int fromAxis, int toAxis);

/// One step of a plan: a primitive over disjoint device groups.
struct RvdStep {
  Primitive kind = Primitive::Identity;
  Transition move;
  /// The collective groups, each in member (group rank) order; sorted.
  std::vector<std::vector<int>> groups;
  /// The layout after the step, devices placed as in the file comment. In a
  /// plan the next step may start from a relabeling of it (equivalent, see
  /// RvdLayout::equivalent); its groups are exact either way.
  RvdLayout after;
  /// Bytes of the larger of a device's piece before and after (RvdCost.h).
  int64_t bytesPerDevice = 0;
  double cost = 0;

  /// Tensor dims of the from/to axes, -1 for R and V.
  int fromDim() const { return dimOfAxis(move.fromAxis); }
  int toDim() const { return dimOfAxis(move.toAxis); }
  int groupSize() const { return static_cast<int>(move.chunks); }
};

/// Applies `move` to `layout` (bytes and cost left 0). Errors: no primitive
/// for the axes, chunks < 2, a from-count not divisible by chunks, a
/// tensor dim not divisible by the new D count.
Expected<RvdStep> applyTransition(const RvdLayout &layout, Transition move);

/// The layout that applyTransition(before, move) turns into `after`.
/// Errors as applyTransition, with the counts of `after`.
Expected<RvdLayout> undoTransition(const RvdLayout &after, Transition move);

/// Relabels the R or V axis (size s) by the transpose of its index as an
/// (s/k, k) grid: new index b*(s/k) + a takes old index a*k + b. The result
/// is equivalent to `layout`; later transitions group other members.
/// Precondition: axis is R or V, 1 < k < s, k divides s.
RvdLayout regroupAxis(const RvdLayout &layout, int axis, int64_t k);

} // namespace nnsc::transform
