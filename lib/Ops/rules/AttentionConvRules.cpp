// Convolutions, pooling and fused attention.
#include <algorithm>
#include <optional>

#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

// conv1d/2d/3d, convolution, _convolution: input [N?, C, *spatial], weight
// [O, C/groups, *kernel], bias [O]. As in nnScaler: the batch and the output
// channels split; the input channels are a reduction ('+'), and the bias an
// addend (split along the input channels, one part adds it); spatial
// dims are numerals (splitting them needs halo exchange). A transposed
// convolution (conv_transpose*d, or transposed=true) has weight [C, O/groups,
// *kernel] and splits the same way with the weight's first two dims swapped.
// Grouped convolutions split the batch only.
std::vector<std::string> convRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &w = inShape(g, n, 1), &out = outShape(g, n, 0);
  size_t spatial = w.size() >= 2 ? w.size() - 2 : 0;
  bool batched = in.size() == w.size();
  if (spatial == 0 || (!batched && in.size() + 1 != w.size()) || out.size() != in.size())
    return {};
  bool simple = intArg(n, "groups").value_or(1) == 1;
  bool transposed =
      boolArg(n, "transposed").value_or(false) || n.op.rfind("aten::conv_transpose", 0) == 0;
  bool hasBias = n.inputs.size() == 3;
  size_t lead = batched ? 1 : 0;
  Dims ins = numerals(in), ws = numerals(w), outs = numerals(out);
  if (batched)
    ins[0] = outs[0] = "n";
  if (simple) {
    ins[lead] = ws[transposed ? 0 : 1] = "c+";
    ws[transposed ? 1 : 0] = outs[lead] = "o";
  }
  std::vector<Dims> all{ins, ws};
  if (hasBias)
    all.push_back(addendDims(simple ? Dims{"o"} : numerals(inShape(g, n, 2))));
  return single(annoStr(all, {outs}));
}

/// The operand shapes of a scaled_dot_product_attention node; `groups` is the
/// number r of query heads per key/value head (1 without grouped queries).
struct SdpaShapes {
  ir::Shape q, k, v;
  int64_t groups;
};

/// Spatial rank from the op name ("max_pool2d" -> 2).
size_t spatialRank(const std::string &op) {
  for (size_t r = 1; r <= 3; ++r)
    if (op.find(std::to_string(r) + "d") != std::string::npos)
      return r;
  return 0;
}

// Pooling and interpolation (upsampling) over the trailing spatial dims
// (numerals); batch and channels split. Every output (values, indices) has the output's shape.
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

// scaled_dot_product_attention(q [*, Hq, L, E], k [*, Hkv, S, E],
// v [*, Hkv, S, Ev], attn_mask?, dropout_p, is_causal, *, scale, enable_gqa):
// splits over the batch and the heads only. L and S meet inside the softmax
// (and a causal mask is relative to the first query), E is contracted and sets
// the default scale 1/sqrt(E): all frozen, and Ev with them so that every part
// is a whole attention of some heads.
//
// Grouped-query attention (enable_gqa, Hq = Hkv * r): query head i reads key /
// value head i / r, so q's heads are the merged dim (h r) with k's and v's h:
// cutting h gives each part a contiguous run of kv heads and exactly the query
// heads that read them. The mask broadcasts against the scores [*, Hq, L, S]
// and splits with whichever of their dims it has.
std::optional<SdpaShapes> sdpaShapes(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() < 3 || n.inputs.size() > 4 || n.outputs.size() != 1)
    return std::nullopt;
  SdpaShapes s{inShape(g, n, 0), inShape(g, n, 1), inShape(g, n, 2), 1};
  size_t rank = s.q.size();
  if (rank < 2 || s.k.size() != rank || s.v.size() != rank || s.q[rank - 1] != s.k[rank - 1] ||
      s.k[rank - 2] != s.v[rank - 2])
    return std::nullopt;
  size_t lead = rank - 2; // the dims before L / S: batch and heads
  bool sameLead = std::equal(s.q.begin(), s.q.begin() + lead, s.k.begin()) &&
                  std::equal(s.k.begin(), s.k.begin() + lead, s.v.begin());
  if (sameLead)
    return s;
  // Grouped query heads: only the heads (dim -3) differ, by a whole factor.
  if (!boolArg(n, "enable_gqa").value_or(false) || rank < 3)
    return std::nullopt;
  size_t h = rank - 3;
  if (!std::equal(s.q.begin(), s.q.begin() + h, s.k.begin()) ||
      !std::equal(s.k.begin(), s.k.begin() + lead, s.v.begin()) || s.k[h] <= 0 ||
      s.q[h] % s.k[h] != 0)
    return std::nullopt;
  s.groups = s.q[h] / s.k[h];
  return s;
}

std::vector<std::string> sdpaRule(const ir::Graph &g, const ir::Node &n) {
  std::optional<SdpaShapes> s = sdpaShapes(g, n);
  if (!s)
    return {};
  size_t lead = s->q.size() - 2;
  // Dim -3 is the heads when there are grouped queries or a batch before it.
  Dims batch = NameGen({"h", "r", "l", "s", "e", "f"}).take(lead);
  if (s->groups > 1 || lead >= 2)
    batch.back() = "h";
  Dims qLead = batch;
  if (s->groups > 1)
    qLead.back() = "(h r)";
  auto with = [](Dims d, std::initializer_list<std::string> tail) {
    d.insert(d.end(), tail);
    return d;
  };
  std::vector<Dims> ins{with(qLead, {"l^", "e^"}), with(batch, {"s^", "e^"}),
                        with(batch, {"s^", "f^"})};
  if (n.inputs.size() == 4) {
    ir::Shape scores(s->q.begin(), s->q.end() - 1);
    scores.push_back(s->k[s->k.size() - 2]);
    auto mask = broadcastDims(inShape(g, n, 3), scores, with(qLead, {"l^", "s^"}));
    if (!mask)
      return {};
    ins.push_back(*mask);
  }
  return single(annoStr(ins, {with(qLead, {"l^", "f^"})}));
}

} // namespace

void registerAttentionConvRules(OpRegistry &registry) {
  for (const char *op :
       {"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
        "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"})
    registry.add(op, convRule);
  for (const char *op :
       {"aten::max_pool1d", "aten::max_pool2d", "aten::max_pool3d", "aten::avg_pool1d",
        "aten::avg_pool2d", "aten::avg_pool3d", "aten::adaptive_avg_pool1d",
        "aten::adaptive_avg_pool2d", "aten::adaptive_avg_pool3d", "aten::adaptive_max_pool1d",
        "aten::adaptive_max_pool2d", "aten::max_pool2d_with_indices"})
    registry.add(op, poolRule);
  for (const char *op :
       {"aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d",
        "aten::upsample_linear1d", "aten::upsample_bilinear2d", "aten::upsample_bicubic2d",
        "aten::upsample_trilinear3d", "aten::_upsample_nearest_exact1d",
        "aten::_upsample_nearest_exact2d", "aten::_upsample_nearest_exact3d"})
    registry.add(op, poolRule);
  registry.add("aten::scaled_dot_product_attention", sdpaRule);
}

} // namespace nnsc::ops::rules
