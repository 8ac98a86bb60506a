// Indexing: slices, selections, gathers and scatters, masks of a matrix,
// embedding, padding.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

// slice / narrow: the sliced dim is a numeral on both sides (never split);
// a slice that keeps the whole dim is the identity there.
std::vector<std::string> sliceRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d || out.size() != in.size())
    return {};
  Dims ins = NameGen().take(in.size()), outs = ins;
  if (in[*d] != out[*d]) {
    ins[*d] = std::to_string(in[*d]);
    outs[*d] = std::to_string(out[*d]);
  }
  return single(annoStr({ins}, {outs}));
}

// select(dim, index): the selected dim (a numeral) disappears.
std::vector<std::string> selectRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d)
    return {};
  Dims ins = NameGen().take(in.size()), outs = ins;
  outs.erase(outs.begin() + static_cast<long>(*d));
  ins[*d] = std::to_string(in[*d]);
  return single(annoStr({ins}, {outs}));
}

// index_select(self, dim, index): the indexed dim is frozen; the output has
// the index's length there, so splitting the index splits the output.
std::vector<std::string> indexSelectRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d)
    return {};
  NameGen names;
  Dims ins = names.take(in.size()), outs = ins;
  std::string idx = names.next();
  addSuffix(ins, *d, "^");
  bool vector = inRank(g, n, 1) == 1;
  outs[*d] = vector ? idx : std::to_string(outShape(g, n, 0).at(*d));
  return single(annoStr({ins, vector ? Dims{idx} : Dims{}}, {outs}));
}

// gather(self, dim, index): the output has the index's shape. Dims where
// self and index agree (other than `dim`) split together; the rest freeze.
std::vector<std::string> gatherRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &index = inShape(g, n, 1);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d || in.size() != index.size())
    return {};
  NameGen names;
  Dims ins = names.take(in.size()), idx = ins;
  for (size_t k = 0; k < in.size(); ++k) {
    if (k != *d && in[k] == index[k])
      continue;
    idx[k] = names.next() + "^";
    addSuffix(ins, k, "^");
  }
  return single(annoStr({ins, idx}, {idx}));
}

// tril / triu: the matrix dims are frozen, leading (batch) dims split.
std::vector<std::string> triangleRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || inRank(g, n, 0) < 2)
    return {};
  Dims dims = NameGen().take(inRank(g, n, 0));
  addSuffix(dims, dims.size() - 1, "^");
  addSuffix(dims, dims.size() - 2, "^");
  return single(annoStr({dims}, {dims}));
}

// flip(dims) / roll(shifts, dims): the moved dims are frozen (roll with no
// dims rolls the flattened tensor: everything frozen).
std::vector<std::string> flipRollRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return {};
  size_t rank = inRank(g, n, 0);
  auto listed = intListArg(n, "dims");
  Dims dims = NameGen().take(rank);
  if (!listed || listed->empty())
    return single(annoStr({withSuffix(dims, "^")}, {withSuffix(dims, "^")}));
  auto moved = normDims(*listed, rank);
  if (!moved)
    return {};
  for (size_t d : *moved)
    addSuffix(dims, d, "^");
  return single(annoStr({dims}, {dims}));
}

// embedding(weight, indices): the vocabulary dim of the weight is frozen (an
// aten::embedding shard cannot look up ids outside its rows; nnScaler splits
// it only through its own masked embedding); the hidden dim and the index
// dims split.
std::vector<std::string> embeddingRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || inRank(g, n, 0) != 2)
    return {};
  return single("n^ e, * -> * e");
}

// one_hot(self, num_classes): a new trailing dim of num_classes (a numeral).
std::vector<std::string> oneHotRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return {};
  const ir::Shape &out = outShape(g, n, 0);
  if (out.size() != inRank(g, n, 0) + 1)
    return {};
  Dims ins = NameGen().take(inRank(g, n, 0)), outs = ins;
  outs.push_back(std::to_string(out.back()));
  return single(annoStr({ins}, {outs}));
}

// constant_pad_nd / pad / reflection_pad*d / replication_pad*d(self, pad):
// pad holds (before, after) pairs from the last dim backwards; a padded dim
// changes size (a numeral on both sides, never split), the others split.
std::vector<std::string> padRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return {};
  auto pad = intListArg(n, "pad");
  if (!pad)
    pad = intListArg(n, "padding");
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  if (!pad || pad->size() % 2 != 0 || pad->size() / 2 > in.size() || out.size() != in.size())
    return {};
  Dims ins = NameGen().take(in.size()), outs = ins;
  for (size_t k = 0; k < pad->size() / 2; ++k) {
    size_t d = in.size() - 1 - k;
    if ((*pad)[2 * k] == 0 && (*pad)[2 * k + 1] == 0)
      continue;
    ins[d] = std::to_string(in[d]);
    outs[d] = std::to_string(out[d]);
  }
  return single(annoStr({ins}, {outs}));
}

// scatter / scatter_add / scatter_reduce(self, dim, index, src?): the output
// is self's shape. Dims where index (and src) agree with self, other than
// `dim`, split together; `dim` and any dim the index covers only partly stay
// whole.
std::vector<std::string> scatterRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &index = inShape(g, n, 1);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d || index.size() != in.size() || (n.inputs.size() == 3 && inRank(g, n, 2) != in.size()))
    return {};
  NameGen names;
  Dims self = names.take(in.size()), idx = self;
  for (size_t k = 0; k < in.size(); ++k) {
    if (k != *d && index[k] == in[k] && (n.inputs.size() == 2 || inShape(g, n, 2)[k] == in[k]))
      continue;
    addSuffix(self, k, "^");
    idx[k] = names.next() + "^";
  }
  std::vector<Dims> ins{self, idx};
  if (n.inputs.size() == 3) {
    Dims src = idx;
    for (size_t k = 0; k < in.size(); ++k)
      if (inShape(g, n, 2)[k] != index[k])
        src[k] = names.next() + "^";
    ins.push_back(src);
  }
  return single(annoStr(ins, {self}));
}

// index_add / index_copy / index_fill(self, dim, index, source?): rows of
// source land at the indexed positions of `dim`, which stays whole (with the
// index's length on source); the other dims of self and source split together.
std::vector<std::string> indexAddRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.inputs.size() > 3 || n.outputs.size() != 1 || inRank(g, n, 1) != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  auto d = normDim(intArg(n, "dim").value_or(0), in.size());
  if (!d || (n.inputs.size() == 3 && inRank(g, n, 2) != in.size()))
    return {};
  NameGen names;
  Dims self = names.take(in.size());
  addSuffix(self, *d, "^");
  std::string idx = names.next() + "^";
  std::vector<Dims> ins{self, {idx}};
  if (n.inputs.size() == 3) {
    Dims src = self;
    src[*d] = idx;
    ins.push_back(src);
  }
  return single(annoStr(ins, {self}));
}

} // namespace

void registerIndexRules(OpRegistry &registry) {
  for (const char *op : {"aten::slice", "aten::narrow", "aten::narrow_copy"})
    registry.add(op, sliceRule);
  registry.add("aten::select", selectRule);
  registry.add("aten::index_select", indexSelectRule);
  registry.add("aten::gather", gatherRule);
  for (const char *op : {"aten::tril", "aten::triu", "aten::tril_", "aten::triu_"})
    registry.add(op, triangleRule);
  registry.add("aten::flip", flipRollRule);
  registry.add("aten::roll", flipRollRule);
  registry.add("aten::embedding", embeddingRule);
  registry.add("aten::one_hot", oneHotRule);
  for (const char *op :
       {"aten::constant_pad_nd", "aten::pad", "aten::reflection_pad1d", "aten::reflection_pad2d",
        "aten::reflection_pad3d", "aten::replication_pad1d", "aten::replication_pad2d",
        "aten::replication_pad3d"})
    registry.add(op, padRule);
  for (const char *op : {"aten::scatter", "aten::scatter_add", "aten::scatter_reduce",
                         "aten::scatter_", "aten::scatter_add_", "aten::scatter_reduce_"})
    registry.add(op, scatterRule);
  for (const char *op : {"aten::index_add", "aten::index_copy", "aten::index_fill",
                         "aten::index_add_", "aten::index_copy_", "aten::index_fill_"})
    registry.add(op, indexAddRule);
}

} // namespace nnsc::ops::rules
