// view / reshape / flatten / unflatten: a merged-dim annotation derived from
// the input and output shapes (nnScaler's _reshape_anno).
//
// The dims are cut into the smallest groups whose products agree, e.g.
// [8, 256, 384] -> [8, 256, 6, 64] gives [8]|[8], [256]|[256], [384]|[6, 64].
// A group of one dim on each side is one identifier. A group of one dim on one
// side and several on the other is a merge: 384 = (c d) on the input side and
// c d on the output side, so splitting c splits the heads (and naming d cuts
// every head interleaved). Otherwise the leading dims are related when one
// divides the other, and the remaining dims of the group are numerals
// (fixed). Size-1 dims are the numeral 1; a group of 1s alone and a size-1
// member of a merge take up the name they would have had at another size, so
// a plan file's `ident: c` means the same dim at batch size 1 as at 8.

#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

struct Group {
  std::vector<size_t> in, out; ///< dim indices
};

/// Groups `in` and `out` dims with equal products; nullopt when the element
/// counts differ or a dim is 0.
std::optional<std::vector<Group>> groupDims(const ir::Shape &in, const ir::Shape &out) {
  if (ir::numel(in) != ir::numel(out) || ir::numel(in) == 0)
    return std::nullopt;
  std::vector<Group> groups;
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    Group g{{i}, {j}};
    int64_t pi = in[i], pj = out[j];
    while (pi != pj) {
      if (pi < pj && i + 1 < in.size()) {
        pi *= in[++i];
        g.in.push_back(i);
      } else if (pj < pi && j + 1 < out.size()) {
        pj *= out[++j];
        g.out.push_back(j);
      } else {
        return std::nullopt;
      }
    }
    groups.push_back(g);
    ++i, ++j;
  }
  // What is left on either side is all 1s: it joins the last group.
  for (; i < in.size(); ++i)
    groups.back().in.push_back(i);
  for (; j < out.size(); ++j)
    groups.back().out.push_back(j);
  return groups;
}

class ReshapeAnnotator {
public:
  ReshapeAnnotator(const ir::Shape &in, const ir::Shape &out) : in_(in), out_(out) {}

  /// {input dims, output dims}, or nullopt when the shapes do not match.
  std::optional<std::pair<Dims, Dims>> run() {
    if (in_.empty() || out_.empty())
      return std::pair{numerals(in_), numerals(out_)};
    auto groups = groupDims(in_, out_);
    if (!groups)
      return std::nullopt;
    for (const Group &g : *groups)
      annotate(g);
    return std::pair{inDims_, outDims_};
  }

private:
  /// Emits "1" for the leading size-1 dims of `idx`; returns the rest.
  static std::vector<size_t> skipOnes(const std::vector<size_t> &idx, const ir::Shape &shape,
                                      Dims &dims) {
    size_t k = 0;
    for (; k < idx.size() && shape[idx[k]] == 1; ++k)
      dims.push_back("1");
    return {idx.begin() + static_cast<long>(k), idx.end()};
  }

  void annotate(const Group &g) {
    std::vector<size_t> in = skipOnes(g.in, in_, inDims_);
    std::vector<size_t> out = skipOnes(g.out, out_, outDims_);
    if (in.empty() && out.empty())
      names_.next(); // a group of 1s (a batch of 1): the name [B]|[B] would have
    if (in.empty() || out.empty()) {
      for (size_t d : in)
        inDims_.push_back(std::to_string(in_[d]));
      for (size_t d : out)
        outDims_.push_back(std::to_string(out_[d]));
      return;
    }
    if (in.size() == 1 && nonOnes(out, out_) > 1)
      return mergeGroup(out, out_, outDims_, inDims_);
    if (out.size() == 1 && nonOnes(in, in_) > 1)
      return mergeGroup(in, in_, inDims_, outDims_);
    relateLeading(in_[in[0]], out_[out[0]]);
    for (size_t k = 1; k < in.size(); ++k)
      inDims_.push_back(std::to_string(in_[in[k]]));
    for (size_t k = 1; k < out.size(); ++k)
      outDims_.push_back(std::to_string(out_[out[k]]));
  }

  static size_t nonOnes(const std::vector<size_t> &idx, const ir::Shape &shape) {
    size_t n = 0;
    for (size_t d : idx)
      n += shape[d] != 1 ? 1 : 0;
    return n;
  }

  // One side's single dim is the merge of the other side's dims: every member
  // is named, `a t -> (a t)`, so a later member can be cut too (interleaved,
  // on request: [B, T] -> [B*T] cut along T holds T's chunk of every batch
  // row). Size-1 members are the numeral 1.
  void mergeGroup(const std::vector<size_t> &many, const ir::Shape &shape, Dims &manyDims,
                  Dims &oneDims) {
    std::string merged;
    for (size_t d : many) {
      std::string x = names_.next();
      if (shape[d] == 1)
        x = "1";
      manyDims.push_back(x);
      merged += (merged.empty() ? "" : " ") + x;
    }
    oneDims.push_back("(" + merged + ")");
  }

  void relateLeading(int64_t a, int64_t b) {

    if (a != b && a % b != 0 && b % a != 0) {
      inDims_.push_back(std::to_string(a));
      outDims_.push_back(std::to_string(b));
      return;
    }
    std::string x = names_.next();
    inDims_.push_back(a > b ? "(" + x + " " + std::to_string(a / b) + ")" : x);
    outDims_.push_back(b > a ? "(" + x + " " + std::to_string(b / a) + ")" : x);
  }

  const ir::Shape &in_, &out_;
  NameGen names_;
  Dims inDims_, outDims_;
};

// view, reshape, flatten, unflatten and friends: the target shape is read
// from the output. Further tensor inputs (view_as's `other`) have the
// output's shape and split with it.
std::vector<std::string> reshapeRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  const ir::Shape &out = outShape(g, n, 0);
  auto dims = ReshapeAnnotator(inShape(g, n, 0), out).run();
  if (!dims)
    return {};
  std::vector<Dims> ins{dims->first};
  for (size_t i = 1; i < n.inputs.size(); ++i)
    ins.push_back(inShape(g, n, i) == out ? dims->second : Dims{});
  return single(annoStr(ins, {dims->second}));
}

} // namespace

void registerViewRules(OpRegistry &registry) {
  for (const char *op : {"aten::view", "aten::reshape", "aten::_unsafe_view", "aten::flatten",
                         "aten::unflatten", "aten::view_as", "aten::reshape_as"})
    registry.add(op, reshapeRule);
}

} // namespace nnsc::ops::rules
