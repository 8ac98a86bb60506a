// Primitive transitions: which primitive moves which axis, and where each
// device's piece lands (the member convention of RvdPrimitive.h).
#include "nnsc/Transform/RvdPrimitive.h"

#include <algorithm>

namespace nnsc::transform {

namespace {

std::vector<int64_t> coordIn(const std::vector<int64_t> &counts, int64_t flat) {
  std::vector<int64_t> coord(counts.size());
  for (size_t i = counts.size(); i-- > 0;) {
    coord[i] = flat % counts[i];
    flat /= counts[i];
  }
  return coord;
}

int64_t flatIn(const std::vector<int64_t> &counts, const std::vector<int64_t> &coord) {
  int64_t flat = 0;
  for (size_t i = 0; i < counts.size(); ++i)
    flat = flat * counts[i] + coord[i];
  return flat;
}

// Where the piece at a before-coordinate goes: from-index q*c + m becomes q,
// to-index y becomes y*c + m.
std::vector<int64_t> moveCoord(std::vector<int64_t> coord, const Transition &t) {
  int64_t m = coord[t.fromAxis] % t.chunks;
  coord[t.fromAxis] /= t.chunks;
  coord[t.toAxis] = coord[t.toAxis] * t.chunks + m;
  return coord;
}

bool validAxis(int axis, int numAxes) { return axis >= 0 && axis < numAxes; }

// Checks the axes and chunk count of `move`; returns its primitive.
Expected<Primitive> checkAxes(const std::vector<int64_t> &counts, const Transition &move) {
  int n = static_cast<int>(counts.size());
  if (!validAxis(move.fromAxis, n) || !validAxis(move.toAxis, n))
    return errorf("transition axis out of range for layout {}", countsStr(counts));
  auto kind = primitiveFor(move.fromAxis, move.toAxis);
  if (!kind)
    return kind.status();
  if (move.chunks < 2)
    return errorf("transition {}->{} needs at least 2 chunks, got {}", axisName(move.fromAxis),
                  axisName(move.toAxis), move.chunks);
  return kind;
}

// Checks that `axis` of `counts` splits into move.chunks groups.
Status checkDivides(const std::vector<int64_t> &counts, int axis, const Transition &move) {
  if (counts[axis] % move.chunks != 0)
    return errorf("{} count {} of layout {} does not divide into {} groups", axisName(axis),
                  counts[axis], countsStr(counts), move.chunks);
  return Status::ok();
}

std::vector<int64_t> countsAfter(std::vector<int64_t> counts, const Transition &move) {
  counts[move.fromAxis] /= move.chunks;
  counts[move.toAxis] *= move.chunks;
  return counts;
}

// The devices of the group whose member 0 sits at `coord`, in member order.
std::vector<int> groupAt(const RvdLayout &layout, std::vector<int64_t> coord,
                         const Transition &move) {
  std::vector<int> group;
  for (int64_t m = 0; m < move.chunks; ++m, ++coord[move.fromAxis])
    group.push_back(layout.devices()[layout.flatOf(coord)]);
  return group;
}

} // namespace

const char *primitiveName(Primitive kind) {
  switch (kind) {
  case Primitive::AllGather:
    return "all_gather";
  case Primitive::AllReduce:
    return "all_reduce";
  case Primitive::ReduceScatter:
    return "reduce_scatter";
  case Primitive::AllToAll:
    return "all_to_all";
  case Primitive::Chunk:
    return "chunk";
  case Primitive::ValueSplit:
    return "value_split";
  case Primitive::Identity:
    return "identity";
  }
  return "unknown";
}

bool isLocal(Primitive kind) {
  return kind == Primitive::Chunk || kind == Primitive::ValueSplit || kind == Primitive::Identity;
}

Expected<Primitive> primitiveFor(int fromAxis, int toAxis) {
  bool fromD = fromAxis >= 2, toD = toAxis >= 2;
  if (fromD && toAxis == kAxisR)
    return Primitive::AllGather;
  if (fromD && toD && fromAxis != toAxis)
    return Primitive::AllToAll;
  if (fromAxis == kAxisV && toAxis == kAxisR)
    return Primitive::AllReduce;
  if (fromAxis == kAxisV && toD)
    return Primitive::ReduceScatter;
  if (fromAxis == kAxisR && toD)
    return Primitive::Chunk;
  if (fromAxis == kAxisR && toAxis == kAxisV)
    return Primitive::ValueSplit;
  return errorf("no primitive moves {} into {}; expected one of: D->R, V->R, V->D, D->D, R->D, "
                "R->V",
                axisName(fromAxis), axisName(toAxis));
}

Expected<RvdStep> applyTransition(const RvdLayout &layout, Transition move) {
  auto kind = checkAxes(layout.counts(), move);
  if (!kind)
    return kind.status();
  NNSC_RETURN_IF_ERROR(checkDivides(layout.counts(), move.fromAxis, move));
  std::vector<int64_t> counts = countsAfter(layout.counts(), move);
  std::vector<int> devices(layout.devices().size());
  RvdStep step;
  for (int64_t flat = 0; flat < layout.numDevices(); ++flat) {
    std::vector<int64_t> coord = layout.coordOf(flat);
    devices[flatIn(counts, moveCoord(coord, move))] = layout.devices()[flat];
    if (coord[move.fromAxis] % move.chunks == 0)
      step.groups.push_back(groupAt(layout, coord, move));
  }
  auto after = RvdLayout::fromCounts(layout.shape(), std::move(counts), std::move(devices));
  if (!after)
    return after.status();
  std::sort(step.groups.begin(), step.groups.end());
  step.kind = *kind;
  step.move = move;
  step.after = after.take();
  return step;
}

Expected<RvdLayout> undoTransition(const RvdLayout &after, Transition move) {
  if (auto kind = checkAxes(after.counts(), move); !kind)
    return kind.status();
  NNSC_RETURN_IF_ERROR(checkDivides(after.counts(), move.toAxis, move));
  std::vector<int64_t> counts =
      countsAfter(after.counts(), {move.toAxis, move.fromAxis, move.chunks});
  std::vector<int> devices(after.devices().size());
  for (int64_t flat = 0; flat < after.numDevices(); ++flat)
    devices[flat] = after.devices()[after.flatOf(moveCoord(coordIn(counts, flat), move))];
  return RvdLayout::fromCounts(after.shape(), std::move(counts), std::move(devices));
}

RvdLayout regroupAxis(const RvdLayout &layout, int axis, int64_t k) {
  int64_t outer = layout.axisSize(axis) / k;
  std::vector<int> devices(layout.devices().size());
  for (int64_t flat = 0; flat < layout.numDevices(); ++flat) {
    std::vector<int64_t> coord = layout.coordOf(flat);
    int64_t b = coord[axis] / outer, a = coord[axis] % outer;
    coord[axis] = a * k + b;
    devices[flat] = layout.devices()[layout.flatOf(coord)];
  }
  // Same counts and device set: cannot fail.
  return *RvdLayout::fromCounts(layout.shape(), layout.counts(), std::move(devices));
}

} // namespace nnsc::transform
