// Sub-tensors, placements and lookups of the partitioned graph (Partition.h).
#include <fmt/format.h>

#include "nnsc/Transform/Partition.h"

namespace nnsc::transform {

bool SubTensor::interleaved() const {
  for (size_t k = 0; k < start.size(); ++k)
    if (blocksOf(k) > 1)
      return true;
  return false;
}

ir::Shape SubTensor::shape() const {
  ir::Shape out;
  for (size_t k = 0; k < start.size(); ++k)
    out.push_back((stop[k] - start[k]) * blocksOf(k));
  return out;
}

bool SubTensor::isWhole(const ir::Shape &fullShape) const {
  if (valueChunks != 1 || start.size() != fullShape.size())
    return false;
  for (size_t k = 0; k < start.size(); ++k)
    if (start[k] != 0 || stop[k] * blocksOf(k) != fullShape[k])
      return false;
  return true;
}

bool SubTensor::operator==(const SubTensor &o) const {
  if (tensor != o.tensor || start != o.start || stop != o.stop || valueIndex != o.valueIndex ||
      valueChunks != o.valueChunks)
    return false;
  for (size_t k = 0; k < start.size(); ++k)
    if (blocksOf(k) != o.blocksOf(k))
      return false;
  return true;
}

std::string SubTensor::str() const {
  std::string dims;
  for (size_t k = 0; k < start.size(); ++k) {
    std::string b = blocksOf(k) > 1 ? fmt::format("{{{}}}", blocksOf(k)) : "";
    dims += fmt::format("{}{}:{}{}", k ? ", " : "", start[k], stop[k], b);
  }
  std::string value = valueChunks > 1 ? fmt::format(" v{}/{}", valueIndex, valueChunks) : "";
  return fmt::format("[{}]{}", dims, value);
}

SubTensor pieceOf(const RvdLayout &layout, int64_t tensor, int index) {
  SubTensor s;
  s.tensor = tensor;
  std::vector<int64_t> coord = layout.coordOf(index);
  std::vector<int64_t> piece = layout.pieceShape();
  for (int k = 0; k < layout.rank(); ++k) {
    auto dim = static_cast<size_t>(k);
    int64_t c = coord[static_cast<size_t>(axisOfDim(k))];
    int64_t chunk = piece[dim] / layout.blocks()[dim]; // within one block
    s.start.push_back(c * chunk);
    s.stop.push_back((c + 1) * chunk);
  }
  if (layout.interleaved())
    s.blocks = layout.blocks();

  s.valueIndex = static_cast<int>(coord[kAxisV]);
  s.valueChunks = static_cast<int>(layout.v());
  return s;
}

const SubTensor *TensorPlacement::pieceOn(int device) const {
  const std::vector<int> &devs = layout.devices();
  for (size_t i = 0; i < devs.size(); ++i)
    if (devs[i] == device)
      return &pieces[i];
  return nullptr;
}

const std::vector<int> *CommOp::groupOf(int device) const {
  for (const std::vector<int> &g : groups)
    if (std::find(g.begin(), g.end(), device) != g.end())
      return &g;
  return nullptr;
}

const NodePart *PartitionedGraph::partOn(int64_t node, int device) const {
  for (const NodePart &p : parts.at(static_cast<size_t>(node)))
    if (p.device == device)
      return &p;
  return nullptr;
}

} // namespace nnsc::transform
