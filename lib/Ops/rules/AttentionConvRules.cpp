// Convolutions, pooling and fused attention.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

// conv1d/2d/3d, convolution, _convolution: input [N?, C, *spatial], weight
// [O, C/groups, *kernel], bias [O]. As in nnScaler: the batch and the output
// channels split; the input channels are a reduction ('+') without a bias and
// frozen with one (a partial sum would add the bias once per part); spatial
// dims are numerals (splitting them needs halo exchange). Grouped and
// transposed convolutions split the batch only.
std::vector<std::string> convRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &w = inShape(g, n, 1), &out = outShape(g, n, 0);
  size_t spatial = w.size() >= 2 ? w.size() - 2 : 0;
  bool batched = in.size() == w.size();
  if (spatial == 0 || (!batched && in.size() + 1 != w.size()) || out.size() != in.size())
    return {};
  bool simple = intArg(n, "groups").value_or(1) == 1 && !boolArg(n, "transposed").value_or(false);
  bool hasBias = n.inputs.size() == 3;
  size_t lead = batched ? 1 : 0;
  Dims ins = numerals(in), ws = numerals(w), outs = numerals(out);
  if (batched)
    ins[0] = outs[0] = "n";
  if (simple) {
    ins[lead] = ws[1] = hasBias ? "c^" : "c+";
    ws[0] = outs[lead] = "o";
  }
  std::vector<Dims> all{ins, ws};
  if (hasBias)
    all.push_back(simple ? Dims{"o"} : numerals(inShape(g, n, 2)));
  return single(annoStr(all, {outs}));
}

/// Spatial rank from the op name ("max_pool2d" -> 2).
size_t spatialRank(const std::string &op) {
  for (size_t r = 1; r <= 3; ++r)
    if (op.find(std::to_string(r) + "d") != std::string::npos)
      return r;
  return 0;
}

// Pooling over the trailing spatial dims (numerals); batch and channels
// split. Every output (values, indices) has the output's shape.
std::vector<std::string> poolRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.empty())
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  size_t spatial = spatialRank(n.op);
  if (spatial == 0 || in.size() <= spatial || out.size() != in.size())
    return {};
  Dims ins = numerals(in), outs = numerals(out);
  Dims lead = NameGen().take(in.size() - spatial);
  for (size_t d = 0; d < lead.size(); ++d)
    ins[d] = outs[d] = lead[d];
  for (size_t o = 1; o < n.outputs.size(); ++o)
    if (outShape(g, n, o) != out)
      return {};
  return single(annoStr({ins}, std::vector<Dims>(n.outputs.size(), outs)));
}

// scaled_dot_product_attention(q [*, L, E], k [*, S, E], v [*, S, Ev], mask?):
// batch and head dims split, so do the queries (unless causal: the mask is
// relative to the first query) and the value features; E and S are
// contracted inside a softmax: frozen. The mask broadcasts to [*, L, S].
std::vector<std::string> sdpaRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 3 || n.inputs.size() > 4 || n.outputs.size() != 1)
    return {};
  const ir::Shape &q = inShape(g, n, 0), &k = inShape(g, n, 1), &v = inShape(g, n, 2);
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size() ||
      !std::equal(q.begin(), q.end() - 2, k.begin()) ||
      !std::equal(q.begin(), q.end() - 2, v.begin()))
    return {};
  Dims batch = NameGen({"l", "e", "s", "v"}).take(q.size() - 2);
  std::string l = boolArg(n, "is_causal").value_or(false) ? "l^" : "l";
  auto with = [&](std::initializer_list<std::string> tail) {
    Dims d = batch;
    d.insert(d.end(), tail);
    return d;
  };
  std::vector<Dims> ins{with({l, "e^"}), with({"s^", "e^"}), with({"s^", "v"})};
  if (n.inputs.size() == 4) {
    ir::Shape scores(q.begin(), q.end() - 1);
    scores.push_back(k[k.size() - 2]);
    auto mask = broadcastDims(inShape(g, n, 3), scores, with({l, "s^"}));
    if (!mask)
      return {};
    ins.push_back(*mask);
  }
  return single(annoStr(ins, {with({l, "v"})}));
}

} // namespace

void registerAttentionConvRules(OpRegistry &registry) {
  for (const char *op :
       {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution"})
    registry.add(op, convRule);
  for (const char *op :
       {"aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::avg_pool1d",
        "aten::avg_pool2d", "aten::avg_pool3d", "aten::adaptive_avg_pool1d",
        "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool1d",
        "aten::adaptive_max_pool2d", "aten::max_pool2d_with_indices"})
    registry.add(op, poolRule);
  registry.add("aten::scaled_dot_product_attention", sdpaRule);
}

} // namespace nnsc::ops::rules
