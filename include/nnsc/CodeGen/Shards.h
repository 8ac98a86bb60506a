#pragma once
/// Writing a rank's weight shards (rank{r}.safetensors) by slicing the full
/// weights of weights.safetensors with each shard's slice.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Safetensors.h"
#include "nnsc/Support/Status.h"

namespace nnsc::codegen {

/// The row-major bytes of the box [start, stop) of a row-major tensor of
/// shape `full` and `elementSize`-byte elements held in `bytes`.
/// Preconditions: bytes.size() == numel(full) * elementSize, 0 <= start <=
/// stop <= full per dim.
std::string sliceTensor(std::string_view bytes, const ir::Shape &full, int64_t elementSize,
                        const std::vector<int64_t> &start, const std::vector<int64_t> &stop);

/// Checks that every shard of `layout` can be written: its tensor is in
/// `weights` with the graph's dtype and shape (or is a constant with data).
Status checkShardSources(const ir::Graph &graph, const RankLayout &layout,
                         const SafetensorsFile &weights, const std::string &weightsPath);

/// Writes `layout`'s shards to `path`, keyed by local name: parameters and
/// buffers sliced from `weights` (looked up by state_dict name or alias;
/// dtype and shape must match the graph), constants from the graph's
/// recorded bytes. Errors name the tensor and `weightsPath` (for messages).
Status writeRankShards(const std::string &path, const ir::Graph &graph, const RankLayout &layout,
                       const SafetensorsFile &weights, const std::string &weightsPath);

} // namespace nnsc::codegen
