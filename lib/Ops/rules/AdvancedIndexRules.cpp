// Advanced indexing and the scatters the trace emits for writes into views:
// index (x[idx], x[:, i, j]), index_put, take_along_dim, slice_scatter,
// select_scatter.
//
// Advanced indexing follows NumPy: the index tensors broadcast to one shape B;
// the result has B in place of the indexed dims when those are adjacent, in
// front of the remaining dims otherwise. An indexed dim of self is frozen (a
// shard could not serve indices outside its range); the other dims of self
// split with the result. B splits in x[idx] (each result element reads one
// index element) but not in index_put, whose result has no B dims.
#include <algorithm>

#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

/// The non-None entries of a Tensor?[] argument `indices`: which dims of self
/// they index and which node inputs hold them.
struct IndexEntries {
  std::vector<size_t> dims;
  std::vector<size_t> inputs;
  bool mask = false; ///< a bool / uint8 index (a mask)
};

std::optional<IndexEntries> indexEntries(const ir::Graph &g, const ir::Node &n) {
  const ir::Argument *a = n.arg("indices");
  const auto *refs = a ? std::get_if<ir::TensorListRef>(&a->value) : nullptr;
  if (!refs || refs->indices.size() > inRank(g, n, 0))
    return std::nullopt;
  IndexEntries e;
  for (size_t k = 0; k < refs->indices.size(); ++k) {
    int32_t i = refs->indices[k];
    if (i == -1) // None (see TensorListRef)
      continue;
    if (i <= 0 || static_cast<size_t>(i) >= n.inputs.size())
      return std::nullopt;
    ir::DType t = g.tensor(n.inputs[static_cast<size_t>(i)]).dtype;
    e.mask |= t == ir::DType::Bool || t == ir::DType::UInt8;
    e.dims.push_back(k);
    e.inputs.push_back(static_cast<size_t>(i));
  }
  if (e.dims.empty())
    return std::nullopt;
  return e;
}

/// The broadcast shape of the index tensors; nullopt when they do not broadcast.
std::optional<ir::Shape> broadcastShape(const ir::Graph &g, const ir::Node &n,
                                        const IndexEntries &e) {
  ir::Shape out;
  for (size_t i : e.inputs) {
    const ir::Shape &s = inShape(g, n, i);
    if (s.size() > out.size())
      out.insert(out.begin(), s.size() - out.size(), 1);
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t &o = out[out.size() - s.size() + k];
      if (o != s[k] && o != 1 && s[k] != 1)
        return std::nullopt;
      o = std::max(o, s[k]);
    }
  }
  return out;
}

/// The result's dims (names or sizes): `self` without the indexed dims, and
/// `b` in their place when they are adjacent, in front otherwise.
template <typename T>
std::vector<T> resultDims(const std::vector<T> &self, const IndexEntries &e,
                          const std::vector<T> &b) {
  bool adjacent = e.dims.back() - e.dims.front() + 1 == e.dims.size();
  std::vector<T> out;
  if (!adjacent)
    out = b;
  for (size_t d = 0; d < self.size(); ++d) {
    if (adjacent && d == e.dims.front())
      out.insert(out.end(), b.begin(), b.end());
    if (std::find(e.dims.begin(), e.dims.end(), d) == e.dims.end())
      out.push_back(self[d]);
  }
  return out;
}

/// Everything an index / index_put annotation is built from.
struct Indexing {
  IndexEntries entries;
  ir::Shape b;         ///< the broadcast index shape
  Dims self, bDims;    ///< self's dims (indexed ones frozen) and B's
  Dims result;         ///< dims of self[indices]
  ir::Shape resultShape;
};

std::optional<Indexing> indexing(const ir::Graph &g, const ir::Node &n, bool freezeB) {
  auto e = indexEntries(g, n);
  if (!e || e->mask)
    return std::nullopt;
  auto b = broadcastShape(g, n, *e);
  if (!b)
    return std::nullopt;
  NameGen names;
  Indexing ix{*e, *b, names.take(inRank(g, n, 0)), names.take(b->size()), {}, {}};
  if (freezeB)
    ix.bDims = withSuffix(ix.bDims, "^");
  ix.result = resultDims(ix.self, *e, ix.bDims);
  ix.resultShape = resultDims(inShape(g, n, 0), *e, *b);
  for (size_t d : e->dims)
    addSuffix(ix.self, d, "^");
  return ix;
}

/// The dims of each index tensor, broadcast against B.
std::optional<std::vector<Dims>> indexTensorDims(const ir::Graph &g, const ir::Node &n,
                                                 const Indexing &ix) {
  std::vector<Dims> out;
  for (size_t i : ix.entries.inputs) {
    auto d = broadcastDims(inShape(g, n, i), ix.b, ix.bDims);
    if (!d)
      return std::nullopt;
    out.push_back(*d);
  }
  return out;
}

// index(self, indices): see the file comment. A mask index (bool) has a
// data-dependent result and stays replicate-only.
std::vector<std::string> indexRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  auto ix = indexing(g, n, false);
  if (!ix || n.inputs.size() != 1 + ix->entries.inputs.size() ||
      outShape(g, n, 0) != ix->resultShape)
    return {};
  auto idx = indexTensorDims(g, n, *ix);
  if (!idx)
    return {};
  std::vector<Dims> ins{ix->self};
  ins.insert(ins.end(), idx->begin(), idx->end());
  return single(annoStr(ins, {ix->result}));
}

/// The node input that argument `name` refers to; nullopt when it is not a tensor.
std::optional<size_t> tensorArg(const ir::Node &n, std::string_view name) {
  const ir::Argument *a = n.arg(name);
  const auto *ref = a ? std::get_if<ir::TensorRef>(&a->value) : nullptr;
  if (!ref || ref->index < 0 || static_cast<size_t>(ref->index) >= n.inputs.size())
    return std::nullopt;
  return static_cast<size_t>(ref->index);
}

// index_put(self, indices, values, accumulate): the result is self with
// self[indices] written (or added). Self's other dims split with values; the
// index tensors and B stay whole. x[mask] = v with one bool mask over some
// dims of self and a one-element value is elementwise: the mask splits with them.
std::vector<std::string> maskPutRule(const ir::Graph &g, const ir::Node &n, size_t values) {
  auto e = indexEntries(g, n);
  const ir::Shape &in = inShape(g, n, 0), &mask = inShape(g, n, e->inputs[0]);
  const ir::Shape &v = inShape(g, n, values);
  size_t at = e->dims[0];
  if (e->inputs.size() != 1 || n.inputs.size() != 3 || at + mask.size() > in.size() ||
      !std::equal(mask.begin(), mask.end(), in.begin() + static_cast<long>(at)) ||
      std::count_if(v.begin(), v.end(), [](int64_t s) { return s != 1; }) > 0)
    return {};
  Dims self = NameGen().take(in.size());
  Dims m(self.begin() + static_cast<long>(at), self.begin() + static_cast<long>(at + mask.size()));
  std::vector<Dims> ins(3);
  ins[0] = self;
  ins[e->inputs[0]] = m;
  ins[values] = v.empty() ? Dims{} : Dims(v.size(), "1");
  return single(annoStr(ins, {self}));
}

std::vector<std::string> indexPutRule(const ir::Graph &g, const ir::Node &n) {
  auto values = tensorArg(n, "values");
  auto e = n.inputs.empty() ? std::nullopt : indexEntries(g, n);
  if (!values || !e || n.outputs.size() != 1)
    return {};
  if (e->mask)
    return maskPutRule(g, n, *values);
  auto ix = indexing(g, n, true);
  if (!ix || n.inputs.size() != 2 + ix->entries.inputs.size())
    return {};
  auto idx = indexTensorDims(g, n, *ix);
  auto val = broadcastDims(inShape(g, n, *values), ix->resultShape, ix->result);
  if (!idx || !val)
    return {};
  std::vector<Dims> ins(n.inputs.size());
  ins[0] = ix->self;
  for (size_t k = 0; k < idx->size(); ++k)
    ins[ix->entries.inputs[k]] = (*idx)[k];
  ins[*values] = *val;
  return single(annoStr(ins, {ix->self}));
}

// take_along_dim(self, indices, dim): gather with broadcasting. Dims (other
// than `dim`) where self and indices agree split together; where one of them
// is 1 it broadcasts (the numeral 1) and the other's dim stays whole.
std::vector<std::string> takeAlongDimRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || inRank(g, n, 1) != inRank(g, n, 0))
    return {};
  const ir::Shape &in = inShape(g, n, 0), &index = inShape(g, n, 1);
  auto d = normDim(intArg(n, "dim").value_or(-1000), in.size());
  if (!d)
    return {}; // no dim: the flattened tensor
  NameGen names;
  Dims self = names.take(in.size()), idx = self, out = self;
  for (size_t k = 0; k < in.size(); ++k) {
    if (k != *d && in[k] == index[k])
      continue;
    std::string fresh = names.next() + "^";
    addSuffix(self, k, "^");
    idx[k] = out[k] = fresh;
    if (k != *d && in[k] == 1)
      self[k] = "1";
    else if (k != *d && index[k] == 1) {
      idx[k] = "1";
      out[k] = self[k];
    }
  }
  return single(annoStr({self, idx}, {out}));
}

// slice_scatter(self, src, dim, start, end, step): src lands in a range of
// `dim`, which stays whole (a numeral on src); a range that is the whole dim
// splits like the others (LocalArgs keeps its bounds local).
std::vector<std::string> sliceScatterRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || inRank(g, n, 1) != inRank(g, n, 0))
    return {};
  const ir::Shape &in = inShape(g, n, 0), &src = inShape(g, n, 1);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d)
    return {};
  Dims self = NameGen().take(in.size()), part = self;
  if (src[*d] != in[*d]) {
    addSuffix(self, *d, "^");
    part[*d] = std::to_string(src[*d]);
  }
  return single(annoStr({self, part}, {self}));
}

// select_scatter(self, src, dim, index): src (without `dim`) lands at one
// index of `dim`, which stays whole.
std::vector<std::string> selectScatterRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || inRank(g, n, 1) + 1 != inRank(g, n, 0))
    return {};
  auto d = normDim(intArg(n, "dim").value_or(0), inRank(g, n, 0));
  if (!d)
    return {};
  Dims self = NameGen().take(inRank(g, n, 0)), part = self;
  part.erase(part.begin() + static_cast<long>(*d));
  addSuffix(self, *d, "^");
  return single(annoStr({self, part}, {self}));
}

} // namespace

void registerAdvancedIndexRules(OpRegistry &registry) {
  registry.add("aten::index", indexRule);
  for (const char *op : {"aten::index_put", "aten::index_put_", "aten::_index_put_impl"})
    registry.add(op, indexPutRule);
  registry.add("aten::take_along_dim", takeAlongDimRule);
  registry.add("aten::slice_scatter", sliceScatterRule);
  registry.add("aten::select_scatter", selectScatterRule);
}

} // namespace nnsc::ops::rules
