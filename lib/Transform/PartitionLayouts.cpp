// Node layouts (PartitionLayouts.h).
#include "PartitionLayouts.h"

#include <map>

namespace nnsc::transform {

namespace {

std::vector<int64_t> ones(size_t rank) { return std::vector<int64_t>(rank, 1); }

Expected<RvdLayout> partialLayout(const ir::Shape &shape, const std::vector<int> &devices) {
  return RvdLayout::make(shape, 1, static_cast<int64_t>(devices.size()), ones(shape.size()),
                         devices);
}

Expected<RvdLayout> layoutFor(const ir::Shape &shape, int dim, int64_t blocks, bool partial,
                              const std::vector<int> &devices) {
  if (partial)
    return partialLayout(shape, devices);
  if (dim < 0)
    return replicatedLayout(shape, devices);
  auto split = splitLayout(shape, dim, devices);
  if (!split || blocks <= 1)
    return split;
  std::vector<int64_t> b = ones(shape.size());
  b[static_cast<size_t>(dim)] = blocks;
  return split->withBlocks(b);
}

} // namespace

Expected<RvdLayout> replicatedLayout(const ir::Shape &shape, const std::vector<int> &devices) {
  return RvdLayout::make(shape, static_cast<int64_t>(devices.size()), 1, ones(shape.size()),
                         devices);
}

Expected<RvdLayout> withoutPartials(const RvdLayout &layout) {
  if (layout.v() <= 1)
    return layout;
  std::vector<int64_t> counts = layout.counts();
  counts[kAxisR] *= counts[kAxisV];
  counts[kAxisV] = 1;
  auto whole = RvdLayout::fromCounts(layout.shape(), counts, layout.devices());
  if (!whole)
    return whole.status();
  return whole->withBlocks(layout.blocks());
}

Expected<RvdLayout> splitLayout(const ir::Shape &shape, int dim, const std::vector<int> &devices) {
  std::vector<int64_t> d = ones(shape.size());
  d.at(static_cast<size_t>(dim)) = static_cast<int64_t>(devices.size());
  return RvdLayout::make(shape, 1, 1, d, devices);
}

Expected<NodeLayouts> nodeLayouts(const ir::Graph &graph, const ir::Node &node,
                                  const plan::ResolvedSplit &split, const std::vector<int> &devices,
                                  bool shareOutput) {
  NodeLayouts out;
  bool whole = split.num <= 1;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    int dim = whole ? -1 : split.effect.inputDims[i];
    int64_t blocks = whole ? 1 : split.effect.inputBlocks[i];
    bool partial = !whole && split.effect.valueInput(i);
    auto l = layoutFor(graph.tensor(node.inputs[i]).shape, dim, blocks, partial, devices);
    if (!l)
      return l.status();
    out.inputs.push_back(l.take());
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    int dim = whole ? -1 : split.effect.outputDims[o];
    bool partial = !whole && (split.effect.valueSplit || (dim < 0 && shareOutput));
    int64_t blocks = whole ? 1 : split.effect.outputBlocks[o];
    auto l = layoutFor(graph.tensor(node.outputs[o]).shape, dim, blocks, partial, devices);

    if (!l)
      return l.status();
    out.outputs.push_back(l.take());
  }
  return out;
}

std::vector<std::vector<int>> replicaGroups(const RvdLayout &layout) {
  std::map<std::vector<int64_t>, std::vector<int>> byPiece;
  std::vector<std::vector<int64_t>> order;
  for (int i = 0; i < layout.numDevices(); ++i) {
    std::vector<int64_t> coord = layout.coordOf(i);
    coord[kAxisR] = 0;
    auto [it, fresh] = byPiece.try_emplace(coord);
    if (fresh)
      order.push_back(coord);
    it->second.push_back(layout.devices()[static_cast<size_t>(i)]);
  }
  std::vector<std::vector<int>> groups;
  for (const auto &key : order)
    groups.push_back(byPiece[key]);
  std::sort(groups.begin(), groups.end());
  return groups;
}

} // namespace nnsc::transform
