// Tensor creators with no tensor to follow (arange, ones, zeros, full, ...).
//
// Their outputs are numerals: the grammar lets an output use only identifiers
// bound by an input, and these ops have none, so the created tensor is never
// split (it is built whole on each device that needs it; nnScaler splits some
// of them only through op-specific rewrites of the size argument). A tensor
// input they may have (new_zeros' self, a 0-dim fill value) lends only its
// dtype or value: replicated ('?'). A 0-dim result is '?'.
#include "RuleUtil.h"
#include "Rules.h"

namespace nnsc::ops::rules {
namespace {

std::vector<std::string> creationRule(const ir::Graph &g, const ir::Node &n) {
  if (n.outputs.empty())
    return {};
  std::vector<Dims> ins(n.inputs.size()), outs;
  for (size_t o = 0; o < n.outputs.size(); ++o)
    outs.push_back(numerals(outShape(g, n, o)));
  return single(annoStr(ins, outs));
}

constexpr const char *kCreators[] = {
    "arange",        "ones",      "zeros",    "full",     "empty",     "empty_strided", "rand",
    "randn",         "randint",   "randperm", "linspace", "logspace",  "eye",           "tensor",
    "scalar_tensor", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor"};

} // namespace

void registerCreationRules(OpRegistry &registry) {
  for (const char *op : kCreators)
    registry.add(std::string("aten::") + op, creationRule);
}

} // namespace nnsc::ops::rules
