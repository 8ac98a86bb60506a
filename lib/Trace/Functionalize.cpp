// In-place semantics in SSA form. The trace records an in-place op as its
// functional twin producing a new value; this file makes every other reader
// see that value. A write through a view is carried back to the view's base
// by the inverse of each view op (slice → slice_scatter, select →
// select_scatter, view → reshape, …); views of a written tensor are replayed
// on its new value when next read; a buffer's final value becomes a state
// update that the runtime writes back after each forward.
#include "GraphExecutor.h"

#include <cstdlib>
#include <numeric>
#include <set>

#include <fmt/format.h>

namespace nnsc::trace {

using torch::jit::Node;

namespace {

// Views with the parent's elements in the parent's row-major order: a write
// through one is the written value reshaped to the parent's shape.
bool isReshapeView(const std::string &op) {
  static const std::set<std::string> ops = {
      "aten::view",       "aten::reshape",    "aten::_reshape_alias",  "aten::_unsafe_view",
      "aten::flatten",    "aten::unflatten",  "aten::squeeze",         "aten::unsqueeze",
      "aten::view_as",    "aten::reshape_as", "aten::alias",           "aten::detach",
      "aten::contiguous", "aten::expand",     "aten::expand_as",       "aten::to",
      "aten::type_as",    "aten::dropout",    "aten::feature_dropout", "aten::alpha_dropout"};
  return ops.count(op) > 0;
}

ir::Argument copiedArg(const ir::Node &from, const std::string &name, ir::ArgValue fallback) {
  const ir::Argument *a = from.arg(name);
  return {name, a ? a->value : fallback};
}

int64_t wrapDim(int64_t d, size_t rank) { return d < 0 ? d + static_cast<int64_t>(rank) : d; }

// Offset of output `k` of a split-like view along `dim`: the sizes of the
// outputs before it.
int64_t splitOffset(const ir::Graph &g, const ir::Node &view, size_t k, int64_t dim) {
  int64_t off = 0;
  for (size_t i = 0; i < k; ++i)
    off += g.tensor(view.outputs[i]).shape.at(static_cast<size_t>(dim));
  return off;
}

// NNSC_TRACE_INJECT_FAULT brings back the bugs this file fixes, so tests can
// prove the self-check catches them: "drop-writes" (writes through views and
// to buffers stay invisible to later readers), "drop-state-updates".
std::string injectedFault() {
  const char *f = std::getenv("NNSC_TRACE_INJECT_FAULT");
  return f ? f : "";
}

} // namespace

const c10::TensorImpl *GraphExecutor::rootOf(const c10::TensorImpl *impl) const {
  for (auto it = views_.find(impl); it != views_.end(); it = views_.find(impl))
    impl = it->second.parent.unsafeGetTensorImpl();
  return impl;
}

std::vector<int64_t> GraphExecutor::recordSyntheticNode(ir::Node n, const ir::Node &site,
                                                        const std::vector<int64_t> &outputsLike) {
  n.modulePath = site.modulePath;
  n.moduleClass = site.moduleClass;
  n.moduleStack = site.moduleStack;
  n.loc = site.loc;
  n.outputs.clear();
  for (int64_t like : outputsLike) {
    ir::Tensor t;
    t.name = out_.tensor(like).name;
    t.shape = out_.tensor(like).shape;
    t.dtype = out_.tensor(like).dtype;
    t.kind = ir::TensorKind::Activation;
    n.outputs.push_back(out_.addTensor(std::move(t)));
  }
  std::vector<int64_t> outs = n.outputs;
  out_.addNode(std::move(n));
  return outs;
}

void GraphExecutor::noteIdentityView(const at::Tensor &out, const at::Tensor &parent) {
  if (out.unsafeGetTensorImpl() == parent.unsafeGetTensorImpl() || !out.is_alias_of(parent))
    return;
  int64_t version = familyVersion_[rootOf(parent.unsafeGetTensorImpl())];
  views_[out.unsafeGetTensorImpl()] = ViewInfo{parent, std::nullopt, 0, 0, version};
}

void GraphExecutor::noteViews(const ir::Node &n, const std::vector<at::Tensor> &tensorInputs,
                              const std::vector<at::Tensor> &tensorOutputs) {
  for (size_t k = 0; k < tensorOutputs.size(); ++k) {
    const at::Tensor &out = tensorOutputs[k];
    for (size_t j = 0; j < tensorInputs.size(); ++j) {
      const at::Tensor &in = tensorInputs[j];
      if (out.unsafeGetTensorImpl() == in.unsafeGetTensorImpl() || !out.is_alias_of(in))
        continue;
      int64_t version = familyVersion_[rootOf(in.unsafeGetTensorImpl())];
      views_[out.unsafeGetTensorImpl()] = ViewInfo{in, n, j, k, version};
      break;
    }
  }
}

// Brings a view's IR value up to date with the latest write to its family by
// replaying its view op on its parent's newest value.
void GraphExecutor::refreshView(const c10::TensorImpl *impl) {
  auto it = views_.find(impl);
  if (it == views_.end())
    return;
  ViewInfo &v = it->second;
  int64_t current = familyVersion_[rootOf(impl)];
  if (v.version == current)
    return;
  const c10::TensorImpl *parent = v.parent.unsafeGetTensorImpl();
  refreshView(parent);
  int64_t parentId = irOf_.at(parent);
  if (!v.node) {
    irOf_[impl] = parentId;
  } else {
    ir::Node replay = *v.node;
    replay.inputs[v.parentInput] = parentId;
    irOf_[impl] = recordSyntheticNode(replay, *v.node, v.node->outputs).at(v.output);
  }
  v.version = current;
}

// The parent's new value once `valueId` is written into the view `view`.
Expected<int64_t> GraphExecutor::scatterIntoParent(const ViewInfo &view, int64_t parentId,
                                                   int64_t valueId, const ir::Node &writer) {
  ir::Shape parentShape = out_.tensor(parentId).shape;
  ir::Shape valueShape = out_.tensor(valueId).shape;
  auto scatter = [&](const std::string &op, std::vector<ir::Argument> extra) {
    ir::Node n;
    n.op = op;
    n.inputs = {parentId, valueId};
    n.args = {{"self", ir::TensorRef{0}}, {"src", ir::TensorRef{1}}};
    n.args.insert(n.args.end(), extra.begin(), extra.end());
    return recordSyntheticNode(n, writer, {parentId}).at(0);
  };
  auto unary = [&](const std::string &op, std::vector<ir::Argument> extra) {
    ir::Node n;
    n.op = op;
    n.inputs = {valueId};
    n.args = {{"self", ir::TensorRef{0}}};
    n.args.insert(n.args.end(), extra.begin(), extra.end());
    return recordSyntheticNode(n, writer, {parentId}).at(0);
  };
  if (!view.node)
    return valueId;
  const ir::Node &v = *view.node;
  const std::string &op = v.op;
  if (op == "aten::slice")
    return scatter("aten::slice_scatter",
                   {copiedArg(v, "dim", int64_t{0}), copiedArg(v, "start", ir::NoneValue{}),
                    copiedArg(v, "end", ir::NoneValue{}), copiedArg(v, "step", int64_t{1})});
  if (op == "aten::select")
    return scatter("aten::select_scatter",
                   {copiedArg(v, "dim", int64_t{0}), copiedArg(v, "index", int64_t{0})});
  if (op == "aten::diagonal")
    return scatter("aten::diagonal_scatter",
                   {copiedArg(v, "offset", int64_t{0}), copiedArg(v, "dim1", int64_t{0}),
                    copiedArg(v, "dim2", int64_t{1})});
  if (op == "aten::as_strided")
    return scatter("aten::as_strided_scatter", {copiedArg(v, "size", std::vector<int64_t>{}),
                                                copiedArg(v, "stride", std::vector<int64_t>{}),
                                                copiedArg(v, "storage_offset", ir::NoneValue{})});
  if (op == "aten::narrow" && v.arg("start") &&
      std::holds_alternative<int64_t>(v.arg("start")->value)) {
    int64_t start = v.intArg("start", 0);
    return scatter("aten::slice_scatter", {copiedArg(v, "dim", int64_t{0}),
                                           {"start", start},
                                           {"end", start + v.intArg("length", 0)},
                                           {"step", int64_t{1}}});
  }
  if (op == "aten::unbind")
    return scatter("aten::select_scatter",
                   {copiedArg(v, "dim", int64_t{0}), {"index", static_cast<int64_t>(view.output)}});
  if (op == "aten::split" || op == "aten::split_with_sizes" || op == "aten::chunk" ||
      op == "aten::unsafe_split" || op == "aten::unsafe_chunk" || op == "aten::tensor_split") {
    int64_t dim = wrapDim(v.intArg("dim", 0), parentShape.size());
    int64_t start = splitOffset(out_, v, view.output, dim);
    int64_t size = valueShape.at(static_cast<size_t>(dim));
    return scatter("aten::slice_scatter",
                   {{"dim", dim}, {"start", start}, {"end", start + size}, {"step", int64_t{1}}});
  }
  if (op == "aten::transpose")
    return unary("aten::transpose",
                 {copiedArg(v, "dim0", int64_t{0}), copiedArg(v, "dim1", int64_t{1})});
  if (op == "aten::t")
    return unary("aten::t", {});
  if (op == "aten::permute") {
    const ir::Argument *dims = v.arg("dims");
    if (dims && std::holds_alternative<std::vector<int64_t>>(dims->value)) {
      const auto &perm = std::get<std::vector<int64_t>>(dims->value);
      std::vector<int64_t> inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i)
        inverse[static_cast<size_t>(wrapDim(perm[i], perm.size()))] = static_cast<int64_t>(i);
      return unary("aten::permute", {{"dims", inverse}});
    }
  }
  if (isReshapeView(op)) {
    int64_t parentNumel =
        std::accumulate(parentShape.begin(), parentShape.end(), int64_t{1}, std::multiplies<>());
    int64_t valueNumel =
        std::accumulate(valueShape.begin(), valueShape.end(), int64_t{1}, std::multiplies<>());
    if (parentShape == valueShape)
      return valueId;
    if (parentNumel == valueNumel)
      return unary("aten::reshape", {{"shape", parentShape}});
    return errorf("an in-place write through a broadcast view ({} at {}) is not supported: the "
                  "view repeats elements of its base",
                  op, v.locString());
  }
  return errorf("an in-place write through a view made by {} (at {}) is not supported; write "
                "into a slice, select, view or permutation of the tensor instead",
                op, v.locString());
}

// After an in-place op wrote `written` (already mapped to its new IR value),
// carries the write up its chain of views to the base, so every later reader
// of any tensor in the family sees it.
Status GraphExecutor::propagateWrite(Node *node, const at::Tensor &written,
                                     const ir::Node &writer) {
  if (injectedFault() == "drop-writes")
    return Status::ok(); // the self-check's fault-injection test
  const c10::TensorImpl *child = written.unsafeGetTensorImpl();
  int64_t value = irOf_.at(child);
  std::vector<const c10::TensorImpl *> chain{child};
  for (auto it = views_.find(child); it != views_.end(); it = views_.find(child)) {
    const c10::TensorImpl *parent = it->second.parent.unsafeGetTensorImpl();
    refreshView(parent);
    auto next = scatterIntoParent(it->second, irOf_.at(parent), value, writer);
    if (!next)
      return errorAt(node, next.status().message());
    value = *next;
    irOf_[parent] = value;
    child = parent;
    chain.push_back(parent);
  }
  if (auto p = paramOfExec_.find(child); p != paramOfExec_.end())
    return errorAt(node, fmt::format("writes parameter '{}' in place during forward; nnsc keeps "
                                     "parameters read-only in forward (update them in the "
                                     "optimizer, or make the tensor a buffer)",
                                     out_.tensor(p->second).name));
  int64_t version = ++familyVersion_[child];
  for (const c10::TensorImpl *impl : chain)
    if (auto v = views_.find(impl); v != views_.end())
      v->second.version = version;
  return Status::ok();
}

// The out-of-place op recorded for an in-place one: `add_` → `add`,
// `__iand__` → `__and__`; it must take the same arguments.
Expected<c10::OperatorName> GraphExecutor::functionalTwin(Node *node,
                                                          const c10::FunctionSchema &schema) {
  const auto &args = schema.arguments();
  for (size_t i = 1; i < args.size(); ++i)
    if (args[i].alias_info() && args[i].alias_info()->isWrite())
      return errorAt(node, fmt::format("writes its argument '{}' in place (an out= form); nnsc "
                                       "records only ops that write their first argument",
                                       args[i].name()));
  std::string name = schema.name();
  std::string twin;
  if (name.rfind("aten::__i", 0) == 0 && name.size() > 11 && name.substr(name.size() - 2) == "__")
    twin = "aten::__" + name.substr(9);
  else if (!name.empty() && name.back() == '_')
    twin = name.substr(0, name.size() - 1);
  auto sameArgs = [&](const c10::FunctionSchema &other) {
    if (other.is_mutable() || other.arguments().size() != args.size())
      return false;
    for (size_t i = 0; i < args.size(); ++i)
      if (other.arguments()[i].name() != args[i].name())
        return false;
    return true;
  };
  if (!twin.empty())
    for (const auto &op : torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(twin)))
      if (sameArgs(op->schema()))
        return op->schema().operator_name();
  return errorAt(node, fmt::format("in-place op {} has no out-of-place form with the same "
                                   "arguments, so nnsc cannot record it functionally",
                                   name));
}

void GraphExecutor::recordStateUpdates() {
  if (injectedFault() == "drop-state-updates")
    return;
  for (const auto &[id, exec] : buffers_) {
    int64_t current = irOf_.at(exec.unsafeGetTensorImpl());
    if (current != id)
      out_.stateUpdates.push_back({id, current});
  }
}

} // namespace nnsc::trace
