#pragma once
/// Slices of a full tensor whose dims may be cut interleaved over blocks.
///
/// A slice takes [start[k], stop[k]) along every dim k. With blocks[k] = b >
/// 1, dim k is b equal blocks of size full[k] / b and the slice takes
/// [start[k], stop[k]) *of each block*, blocks in order (how a fused q/k/v
/// weight is cut by heads). Viewing every such dim as two dims [b, full / b]
/// turns the slice into a plain box over the same row-major bytes: the local
/// tensor is that box, read in order. Shared by codegen (slicing weights) and
/// the runtime (merging checkpoints). No LibTorch.

#include <cstdint>
#include <vector>

namespace nnsc {

/// A plain box over a (possibly viewed) shape.
struct Box {
  std::vector<int64_t> shape;       ///< the full tensor's (viewed) shape
  std::vector<int64_t> start, stop; ///< per dim of `shape`
};

/// The box over the blocked view of `full` that a slice with `blocks` (one
/// per dim, or empty for all 1) takes. Preconditions: start/stop have one
/// entry per dim of `full` and lie within one block; blocks divide the dims.
inline Box blockedBox(const std::vector<int64_t> &full, const std::vector<int64_t> &start,
                      const std::vector<int64_t> &stop, const std::vector<int64_t> &blocks) {
  Box box;
  for (size_t k = 0; k < full.size(); ++k) {
    int64_t b = k < blocks.size() && blocks[k] > 1 ? blocks[k] : 1;
    if (b > 1) {
      box.shape.push_back(b);
      box.start.push_back(0);
      box.stop.push_back(b);
    }
    box.shape.push_back(full[k] / b);
    box.start.push_back(start[k]);
    box.stop.push_back(stop[k]);
  }
  return box;
}

/// True when some dim has more than one block.
inline bool anyBlocks(const std::vector<int64_t> &blocks) {
  for (int64_t b : blocks)
    if (b > 1)
      return true;
  return false;
}

} // namespace nnsc
