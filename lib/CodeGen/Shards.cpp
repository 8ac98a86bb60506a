#include "nnsc/CodeGen/Shards.h"

#include <cstring>
#include <deque>

#include <fmt/format.h>

#include "nnsc/Support/BlockSlice.h"

namespace nnsc::codegen {

std::string sliceTensor(std::string_view bytes, const ir::Shape &full, int64_t elementSize,
                        const std::vector<int64_t> &start, const std::vector<int64_t> &stop) {
  size_t rank = full.size();
  // Row-major strides in bytes, and the innermost dims that are taken whole
  // collapse into one contiguous run.
  std::vector<int64_t> stride(rank + 1, elementSize);
  for (size_t d = rank; d-- > 0;)
    stride[d] = stride[d + 1] * full[d];
  size_t inner = rank;
  while (inner > 0 && start[inner - 1] == 0 && stop[inner - 1] == full[inner - 1])
    --inner;
  int64_t run = inner == 0 ? stride[0] : (stop[inner - 1] - start[inner - 1]) * stride[inner];
  size_t outer = inner == 0 ? 0 : inner - 1; // dims iterated one index at a time
  std::string out;
  std::vector<int64_t> idx(start.begin(), start.begin() + static_cast<long>(outer));
  for (size_t d = 0; d < outer; ++d)
    if (start[d] >= stop[d])
      return out;
  while (true) {
    int64_t offset = inner == 0 ? 0 : start[inner - 1] * stride[inner];
    for (size_t d = 0; d < outer; ++d)
      offset += idx[d] * stride[d + 1];
    out.append(bytes.data() + offset, static_cast<size_t>(std::max<int64_t>(run, 0)));
    size_t d = outer;
    while (d > 0 && ++idx[d - 1] == stop[d - 1]) {
      idx[d - 1] = start[d - 1];
      --d;
    }
    if (d == 0)
      return out;
  }
}

namespace {

const SafetensorsEntry *findWeight(const SafetensorsFile &weights, const ir::Tensor &t) {
  if (const auto *e = weights.find(t.name))
    return e;
  for (const std::string &a : t.aliases)
    if (const auto *e = weights.find(a))
      return e;
  return nullptr;
}

// The full tensor's bytes: from the weights file, or recorded in the graph.
Expected<std::string_view> sourceBytes(const ir::Tensor &t, bool constant,
                                       const SafetensorsFile &weights, const std::string &wpath) {
  int64_t expected = ir::numel(t.shape) * ir::dtypeSize(t.dtype);
  if (constant) {
    if (static_cast<int64_t>(t.data.size()) != expected)
      return errorf("error: constant %{} ({}{}) has no recorded value", t.id,
                    ir::dtypeName(t.dtype), ir::shapeString(t.shape));
    return std::string_view(t.data);
  }
  const SafetensorsEntry *e = findWeight(weights, t);
  if (!e)
    return errorf("{}: error: no tensor '{}' in the weights", wpath, t.name);
  if (e->dtype != ir::dtypeSafetensorsCode(t.dtype) || e->shape != t.shape ||
      static_cast<int64_t>(e->bytes.size()) != expected)
    return errorf("{}: error: '{}' is {}{} in the weights but {}{} in the graph", wpath, e->name,
                  e->dtype, ir::shapeString(e->shape), ir::dtypeSafetensorsCode(t.dtype),
                  ir::shapeString(t.shape));
  return e->bytes;
}

} // namespace

Status checkShardSources(const ir::Graph &graph, const RankLayout &layout,
                         const SafetensorsFile &weights, const std::string &weightsPath) {
  for (const ShardSpec &s : layout.shards) {
    auto bytes = sourceBytes(graph.tensor(s.tensor), s.constant, weights, weightsPath);
    if (!bytes)
      return bytes.status();
  }
  return Status::ok();
}

Status writeRankShards(const std::string &path, const ir::Graph &graph, const RankLayout &layout,
                       const SafetensorsFile &weights, const std::string &wpath) {
  std::vector<SafetensorsEntry> entries;
  std::deque<std::string> owned; // sliced copies; whole shards borrow the mapping
  for (const ShardSpec &s : layout.shards) {
    const ir::Tensor &t = graph.tensor(s.tensor);
    auto bytes = sourceBytes(t, s.constant, weights, wpath);
    if (!bytes)
      return bytes.status();
    if (s.valueChunks != 1)
      return errorf("error: shard {} ({}) is a value chunk; weights are never value-split",
                    s.localName, t.name);
    std::string_view data = *bytes;
    if (s.shape() != t.shape) {
      Box box = blockedBox(t.shape, s.start, s.stop, s.blocks);
      owned.push_back(sliceTensor(data, box.shape, ir::dtypeSize(t.dtype), box.start, box.stop));
      data = owned.back();
    }
    entries.push_back(
        {s.localName, std::string(ir::dtypeSafetensorsCode(t.dtype)), s.shape(), data});
  }
  return writeSafetensors(path, entries,
                          {{"format", "pt"}, {"nnsc.rank", std::to_string(layout.rank)}});
}

} // namespace nnsc::codegen
