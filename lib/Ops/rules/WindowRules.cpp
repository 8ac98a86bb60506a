// Ops that copy each element to several places: repeat_interleave, and the
// sliding windows of Tensor.unfold and im2col (F.unfold).
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

/// "(a 2)": `dim` merged with a trailing numeral (just `dim` when it is 1).
std::string mergedWith(const std::string &dim, int64_t numeral) {
  return numeral == 1 ? dim : "(" + dim + " " + std::to_string(numeral) + ")";
}

// repeat_interleave(self, repeats: int, dim): each element of `dim` is
// repeated in place, so the output's dim is (d r) and splitting d splits it
// in whole runs. A tensor of repeats (a data-dependent size) or no dim (the
// flattened tensor) leaves the input whole.
std::vector<std::string> repeatInterleaveRule(const ir::Graph &g, const ir::Node &n) {
  auto repeats = intArg(n, "repeats");
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || !repeats || *repeats < 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  Dims ins = NameGen().take(in.size()), outs = ins;
  auto d = normDim(intArg(n, "dim").value_or(-1000), in.size());
  if (!d) {
    if (out.size() != 1)
      return {};
    return single(annoStr({withSuffix(ins, "^")}, {numerals(out)}));
  }
  if (out.size() != in.size() || out[*d] != in[*d] * *repeats)
    return {}; // e.g. a meta trace that could not size it
  outs[*d] = mergedWith(ins[*d], *repeats);
  return single(annoStr({ins}, {outs}));
}

// Tensor.unfold(dimension, size, step): `dimension` becomes the window count
// and a trailing dim of `size` is added; both numerals, the rest split.
std::vector<std::string> unfoldRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  auto d = normDim(intArg(n, "dimension").value_or(0), in.size());
  if (!d || out.size() != in.size() + 1)
    return {};
  Dims ins = NameGen().take(in.size()), outs = ins;
  ins[*d] = std::to_string(in[*d]);
  outs[*d] = std::to_string(out[*d]);
  outs.push_back(std::to_string(out.back()));
  return single(annoStr({ins}, {outs}));
}

// im2col(self [N?, C, H, W], kernel_size, ...) -> [N?, C * kh * kw, L]: the
// column dim is channel-major, (c K), so the batch and the channels split.
std::vector<std::string> im2colRule(const ir::Graph &g, const ir::Node &n) {
  auto kernel = intListArg(n, "kernel_size");
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || !kernel || kernel->size() != 2)
    return {};
  const ir::Shape &in = inShape(g, n, 0), &out = outShape(g, n, 0);
  if ((in.size() != 3 && in.size() != 4) || out.size() != in.size() - 1)
    return {};
  size_t c = in.size() - 3; // the channel dim
  int64_t window = (*kernel)[0] * (*kernel)[1];
  if (out[c] != in[c] * window)
    return {};
  Dims ins = numerals(in), outs = numerals(out);
  Dims names = NameGen().take(c + 1);
  for (size_t d = 0; d < c; ++d)
    ins[d] = outs[d] = names[d];
  ins[c] = names[c];
  outs[c] = mergedWith(names[c], window);
  return single(annoStr({ins}, {outs}));
}

} // namespace

void registerWindowRules(OpRegistry &registry) {
  registry.add("aten::repeat_interleave", repeatInterleaveRule);
  registry.add("aten::unfold", unfoldRule);
  registry.add("aten::im2col", im2colRule);
}

} // namespace nnsc::ops::rules
