// Normalisations: the dims a statistic is taken over are frozen.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

// layer_norm / native_layer_norm / rms_norm: the trailing normalized dims are
// frozen in the input, the weight and bias (same names) and the output.
// native_layer_norm's mean and rstd keep the leading dims, 1 elsewhere.
std::vector<std::string> layerNormRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.empty())
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  auto normalized = intListArg(n, "normalized_shape");
  size_t k = normalized ? normalized->size() : 1;
  if (k == 0 || k > in.size())
    return {};
  Dims dims = NameGen().take(in.size());
  for (size_t d = in.size() - k; d < in.size(); ++d)
    addSuffix(dims, d, "^");
  Dims norm(dims.end() - static_cast<long>(k), dims.end());
  ir::Shape normShape(in.end() - static_cast<long>(k), in.end());
  std::vector<Dims> ins{dims};
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (inShape(g, n, i) != normShape)
      return {};
    ins.push_back(norm);
  }
  Dims stats(dims.begin(), dims.end() - static_cast<long>(k));
  stats.resize(in.size(), "1");
  std::vector<Dims> outs{dims};
  for (size_t o = 1; o < n.outputs.size(); ++o)
    outs.push_back(stats);
  return single(annoStr(ins, outs));
}

// batch_norm / native_batch_norm: input [N, C, *spatial]; weight, bias and
// the running statistics are [C]. Channels always split. In training the
// batch statistics are taken over N and the spatial dims, which freezes them;
// in evaluation they split too. Extra outputs of shape [C] (saved mean and
// invstd) split with C; others (empty in evaluation) are numerals.
std::vector<std::string> batchNormRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.empty() || inRank(g, n, 0) < 2)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  Dims dims = NameGen().take(in.size());
  std::string channel = dims[1];
  if (boolArg(n, "training").value_or(true))
    for (size_t d = 0; d < dims.size(); ++d)
      if (d != 1)
        addSuffix(dims, d, "^");
  std::vector<Dims> ins{dims}, outs{dims};
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (inShape(g, n, i) != ir::Shape{in[1]})
      return {};
    ins.push_back({channel});
  }
  for (size_t o = 1; o < n.outputs.size(); ++o) {
    const ir::Shape &s = outShape(g, n, o);
    outs.push_back(s == ir::Shape{in[1]} ? Dims{channel} : numerals(s));
  }
  return single(annoStr(ins, outs));
}

// group_norm(input [N, C, *], num_groups, weight?, bias?) and
// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out,
// mean [N, G], rstd [N, G]): statistics over each group of C / G channels and
// all spatial dims. N splits; so do whole groups: channels are (g k) with k =
// C / G, and LocalArgs gives each part its own group count. Spatial dims are
// frozen.
std::vector<std::string> groupNormRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.empty() || inRank(g, n, 0) < 2)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  int64_t groups = intArg(n, n.op == "aten::group_norm" ? "num_groups" : "group").value_or(0);
  if (groups < 1 || in[1] % groups != 0)
    return {};
  Dims dims = NameGen().take(in.size());
  for (size_t d = 2; d < dims.size(); ++d)
    addSuffix(dims, d, "^");
  int64_t perGroup = in[1] / groups;
  std::string group = groups == 1 ? "1" : dims[1]; // mean and rstd's G
  if (groups == 1)
    addSuffix(dims, 1, "^");
  else if (perGroup > 1)
    dims[1] = "(" + dims[1] + " " + std::to_string(perGroup) + ")";
  std::vector<Dims> ins{dims}, outs{dims};
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (inShape(g, n, i) != ir::Shape{in[1]})
      return {};
    ins.push_back({dims[1]});
  }
  for (size_t o = 1; o < n.outputs.size(); ++o) {
    if (outShape(g, n, o) != ir::Shape{in[0], groups})
      return {};
    outs.push_back({dims[0], group});
  }
  return single(annoStr(ins, outs));
}

// instance_norm(input [N, C, *], weight?, bias?, running_mean?, running_var?,
// use_input_stats, ...): statistics per sample and channel over the spatial
// dims (frozen); N and C split, and every [C] tensor with C. Running
// statistics updated from the batch (use_input_stats with running stats)
// average over N, which then stays whole.
std::vector<std::string> instanceNormRule(const ir::Graph &g, const ir::Node &n) {
  if (n.inputs.empty() || n.outputs.size() != 1 || inRank(g, n, 0) < 3)
    return {};
  const ir::Shape &in = inShape(g, n, 0);
  Dims dims = NameGen().take(in.size());
  for (size_t d = 2; d < dims.size(); ++d)
    addSuffix(dims, d, "^");
  const ir::Argument *mean = n.arg("running_mean");
  bool running = mean && !std::holds_alternative<ir::NoneValue>(mean->value);
  if (running && boolArg(n, "use_input_stats").value_or(true))
    addSuffix(dims, 0, "^");
  std::vector<Dims> ins{dims};
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (inShape(g, n, i) != ir::Shape{in[1]})
      return {};
    ins.push_back({dims[1]});
  }
  return single(annoStr(ins, {dims}));
}

} // namespace

void registerNormRules(OpRegistry &registry) {
  for (const char *op : {"aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm"})
    registry.add(op, layerNormRule);
  for (const char *op : {"aten::batch_norm", "aten::native_batch_norm"})
    registry.add(op, batchNormRule);
  registry.add("aten::group_norm", groupNormRule);
  registry.add("aten::native_group_norm", groupNormRule);
  registry.add("aten::instance_norm", instanceNormRule);
}

} // namespace nnsc::ops::rules
