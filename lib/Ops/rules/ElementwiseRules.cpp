// Elementwise ops: every input is broadcast against the output, dim by dim.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

// Inputs aligned to the right of the output; size-1 dims that broadcast are
// the numeral 1; 0-dim inputs (scalars) are '?'. Every output must have the
// shape of the first.
std::vector<std::string> broadcastRule(const ir::Graph &g, const ir::Node &n) {
  if (n.outputs.empty())
    return {};
  const ir::Shape &out = outShape(g, n, 0);
  Dims outDims = NameGen().take(out.size());
  std::vector<Dims> ins, outs;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    std::optional<Dims> d = broadcastDims(inShape(g, n, i), out, outDims);
    if (!d)
      return {};
    ins.push_back(*d);
  }
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    if (outShape(g, n, o) != out)
      return {};
    outs.push_back(outDims);
  }
  return single(annoStr(ins, outs));
}

// Ops whose later tensor inputs only lend a dtype, device or shape (type_as,
// to(other)): the first input is elementwise; another input of the output's
// shape splits with it, any other is replicated ('?').
std::vector<std::string> likeOtherRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1)
    return {};
  const ir::Shape &out = outShape(g, n, 0);
  if (inShape(g, n, 0) != out)
    return {};
  Dims dims = NameGen().take(out.size());
  std::vector<Dims> ins{dims};
  for (size_t i = 1; i < n.inputs.size(); ++i)
    ins.push_back(inShape(g, n, i) == out ? dims : Dims{});
  return single(annoStr(ins, {dims}));
}

constexpr const char *kBroadcastOps[] = {
    // arithmetic
    "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
    "float_power", "atan2", "hypot", "copysign", "xlogy", "lerp", "addcmul", "addcdiv", "maximum",
    "minimum", "fmax", "fmin", "clamp", "clamp_min", "clamp_max", "clip",
    // comparisons and logic
    "eq", "ne", "lt", "gt", "le", "ge", "greater", "greater_equal", "less", "less_equal",
    "not_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "__and__", "__or__", "__xor__", "where", "masked_fill",
    // unary math
    "neg", "negative", "positive", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "square", "reciprocal", "abs", "sign", "sgn", "ceil", "floor", "round", "trunc",
    "frac", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "erf", "erfc",
    "erfinv", "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "nan_to_num",
    // activations
    "relu", "relu6", "gelu", "silu", "sigmoid", "softplus", "mish", "elu", "selu", "celu",
    "leaky_relu", "hardtanh", "hardswish", "hardsigmoid", "log_sigmoid", "threshold",
    // dropout (the mask of native_dropout has the output's shape) and draws shaped like their
    // input, bernoulli(p) and the in-place fills of stochastic depth (new_empty().bernoulli_(q));
    // docs/randomness.md says which pieces draw which values
    "dropout", "native_dropout", "alpha_dropout",
    "bernoulli", "uniform", "exponential", "log_normal", "cauchy", "geometric",
    // copies, casts, aliases
    "contiguous", "clone", "detach", "alias", "lift_fresh", "_to_copy", "fill", "zero", "copy",
    // creators shaped like their input
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"};

// feature_dropout / feature_alpha_dropout (dropout2d/3d) keep or drop whole
// channels of [N, C, *spatial]: the spatial dims stay whole so that a channel's
// fate is drawn once.
std::vector<std::string> featureDropoutRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || outShape(g, n, 0) != inShape(g, n, 0))
    return {};
  Dims dims = NameGen().take(inRank(g, n, 0));
  for (size_t d = 2; d < dims.size(); ++d)
    addSuffix(dims, d, "^");
  return single(annoStr({dims}, {dims}));
}

constexpr const char *kLikeOtherOps[] = {"to", "type_as"};

} // namespace

void registerElementwiseRules(OpRegistry &registry) {
  for (const char *op : kBroadcastOps) {
    registry.add(std::string("aten::") + op, broadcastRule);
    registry.add(std::string("aten::") + op + "_", broadcastRule); // the in-place form
  }
  registry.add("aten::broadcast_tensors", broadcastRule);
  for (const char *op : {"aten::feature_dropout", "aten::feature_dropout_",
                         "aten::feature_alpha_dropout", "aten::feature_alpha_dropout_"})
    registry.add(op, featureDropoutRule);
  // normal and random also have overloads without a tensor to follow
  // (creation); only their in-place forms fill a tensor like its input.
  registry.add("aten::normal_", broadcastRule);
  registry.add("aten::random_", broadcastRule);
  for (const char *op : kLikeOtherOps)
    registry.add(std::string("aten::") + op, likeOtherRule);
}

} // namespace nnsc::ops::rules
