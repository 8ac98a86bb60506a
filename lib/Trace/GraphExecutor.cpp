#include "GraphExecutor.h"

#include <map>
#include <optional>

#include <fmt/format.h>

namespace nnsc::trace {

using torch::jit::Node;
using torch::jit::Value;

GraphExecutor::GraphExecutor(torch::jit::Module &module, bool meta, ir::Graph &out)
    : module_(module), index_(buildModuleIndex(module)), meta_(meta), out_(out) {}

void GraphExecutor::set(Value *v, c10::IValue iv) {
  keepAlive_.push_back(iv);
  env_[v] = std::move(iv);
}

c10::IValue GraphExecutor::get(Value *v) const {
  auto it = env_.find(v);
  if (it != env_.end())
    return it->second;
  if (auto c = torch::jit::toIValue(v))
    return *c;
  return c10::IValue();
}

Status GraphExecutor::errorAt(Node *node, const std::string &message) const {
  ir::Node info;
  describeNode(node, index_, info);
  std::string where = info.loc.file.empty()
                          ? std::string("<unknown location>")
                          : fmt::format("{}:{}:{}", info.loc.file, info.loc.line, info.loc.col);
  std::string module = info.modulePath.empty() ? "" : fmt::format(" (in {})", info.modulePath);
  return Status::error(
      fmt::format("{}: error: {}: {}{}", where, node->kind().toQualString(), message, module));
}

int64_t GraphExecutor::addActivation(const at::Tensor &t, const std::string &name) {
  ir::Tensor it;
  it.name = name;
  it.shape = t.sizes().vec();
  it.dtype = fromScalarType(t.scalar_type());
  it.kind = ir::TensorKind::Activation;
  int64_t id = out_.addTensor(std::move(it));
  irOf_[t.unsafeGetTensorImpl()] = id;
  return id;
}

// The IR id of a tensor argument; an untracked tensor (a literal or the result
// of folded shape arithmetic) becomes a Constant.
int64_t GraphExecutor::tensorId(const at::Tensor &t, const std::string &hint) {
  refreshView(t.unsafeGetTensorImpl());
  auto it = irOf_.find(t.unsafeGetTensorImpl());
  if (it != irOf_.end())
    return it->second;
  ir::Tensor c;
  c.name = hint.empty() ? "const" : hint;
  c.shape = t.sizes().vec();
  c.dtype = fromScalarType(t.scalar_type());
  c.kind = ir::TensorKind::Constant;
  at::Tensor src = t;
  if (auto d = constData_.find(t.unsafeGetTensorImpl()); d != constData_.end())
    src = d->second;
  if (!src.is_meta() && src.numel() <= 4096) {
    at::Tensor cpu = src.detach().cpu().contiguous();
    c.data.assign(static_cast<const char *>(cpu.data_ptr()), cpu.nbytes());
  }
  int64_t id = out_.addTensor(std::move(c));
  irOf_[t.unsafeGetTensorImpl()] = id;
  keepAlive_.push_back(t);
  if (snapshots_)
    (*snapshots_)[id] = src.detach().clone();
  return id;
}

Status GraphExecutor::declareState() {
  auto declare = [&](const std::string &name, const at::Tensor &t, ir::TensorKind kind) {
    const c10::TensorImpl *impl = t.unsafeGetTensorImpl();
    if (auto it = execOfState_.find(impl); it != execOfState_.end()) {
      out_.tensor(irOf_.at(it->second.unsafeGetTensorImpl())).aliases.push_back(name);
      return;
    }
    // Buffers run on a copy: the forward may update them (BatchNorm's running
    // statistics), and the weights written must be the model's own.
    at::Tensor exec = meta_ ? at::empty(t.sizes(), t.options().device(at::kMeta))
                      : kind == ir::TensorKind::Buffer ? t.detach().clone()
                                                       : t.detach();
    ir::Tensor it;
    it.name = name;
    it.shape = t.sizes().vec();
    it.dtype = fromScalarType(t.scalar_type());
    it.kind = kind;
    it.requiresGrad = kind == ir::TensorKind::Param && t.requires_grad();
    int64_t id = out_.addTensor(std::move(it));
    irOf_[exec.unsafeGetTensorImpl()] = id;
    execOfState_[impl] = exec;
    state_[id] = t;
    keepAlive_.push_back(exec);
    if (kind == ir::TensorKind::Buffer)
      buffers_.emplace_back(id, exec);
    else
      paramOfExec_[exec.unsafeGetTensorImpl()] = id;
  };
  for (const auto &p : module_.named_parameters(/*recurse=*/true))
    declare(p.name, p.value, ir::TensorKind::Param);
  for (const auto &b : module_.named_buffers(/*recurse=*/true))
    declare(b.name, b.value, ir::TensorKind::Buffer);
  return Status::ok();
}

Status GraphExecutor::bindInputs(torch::jit::Graph &graph, const std::vector<at::Tensor> &values,
                                 const std::vector<std::string> &names) {
  auto inputs = graph.inputs();
  set(inputs[0], module_._ivalue());
  for (size_t i = 0; i < values.size(); ++i) {
    at::Tensor v =
        meta_ ? at::empty(values[i].sizes(), values[i].options().device(at::kMeta)) : values[i];
    ir::Tensor t;
    t.name = names[i];
    t.shape = v.sizes().vec();
    t.dtype = fromScalarType(v.scalar_type());
    t.kind = ir::TensorKind::Input;
    int64_t id = out_.addTensor(std::move(t));
    irOf_[v.unsafeGetTensorImpl()] = id;
    out_.inputs.push_back(id);
    set(inputs[i + 1], v);
  }
  return Status::ok();
}

Status GraphExecutor::run(torch::jit::Graph &graph) {
  NNSC_RETURN_IF_ERROR(runBlock(graph.block()));
  recordStateUpdates();
  return bindOutputs(graph);
}

Status GraphExecutor::runBlock(torch::jit::Block *block) {
  for (Node *node : block->nodes())
    NNSC_RETURN_IF_ERROR(runNode(node));
  return Status::ok();
}

Status GraphExecutor::runNode(Node *node) {
  auto kind = node->kind();
  if (kind == c10::prim::Constant) {
    if (auto v = torch::jit::toIValue(node->output())) {
      c10::IValue iv = *v;
      if (iv.isTensor() && meta_ && iv.toTensor().dim() > 0) {
        at::Tensor exec =
            at::empty(iv.toTensor().sizes(), iv.toTensor().options().device(at::kMeta));
        constData_[exec.unsafeGetTensorImpl()] = iv.toTensor();
        iv = exec;
      }
      set(node->output(), iv);
    }
    return Status::ok();
  }
  if (kind == c10::prim::GetAttr)
    return runGetAttr(node);
  if (kind == c10::prim::If)
    return runIf(node);
  if (kind == c10::prim::Loop)
    return runLoop(node);
  if (kind == c10::prim::RaiseException)
    return errorAt(node, "the model raises an exception on these sample inputs");
  if (runStructural(node))
    return Status::ok();
  return runOperator(node);
}

// Lists and tuples are built and taken apart here; the interpreter has no
// standalone operator for them.
bool GraphExecutor::runStructural(Node *node) {
  auto kind = node->kind();
  if (kind == c10::prim::ListConstruct) {
    c10::TypePtr elem = node->output()->type()->expectRef<c10::ListType>().getElementType();
    c10::impl::GenericList list(elem);
    for (Value *v : node->inputs())
      list.push_back(get(v));
    set(node->output(), list);
    return true;
  }
  if (kind == c10::prim::TupleConstruct) {
    std::vector<c10::IValue> elems;
    for (Value *v : node->inputs())
      elems.push_back(get(v));
    set(node->output(), c10::ivalue::Tuple::create(std::move(elems)));
    return true;
  }
  if (kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack) {
    c10::IValue v = get(node->input(0));
    std::vector<c10::IValue> elems =
        v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    for (size_t i = 0; i < node->outputs().size() && i < elems.size(); ++i)
      set(node->outputs()[i], elems[i]);
    return true;
  }
  if (kind == c10::prim::TupleIndex) {
    c10::IValue v = get(node->input(0));
    set(node->output(),
        v.toTupleRef().elements().at(static_cast<size_t>(get(node->input(1)).toInt())));
    return true;
  }
  return false;
}

Status GraphExecutor::runGetAttr(Node *node) {
  c10::IValue self = get(node->input(0));
  if (!self.isObject())
    return errorAt(node, "attribute access on a value that is not a module");
  c10::IValue attr = self.toObject()->getAttr(node->s(c10::attr::name));
  if (attr.isTensor()) {
    auto it = execOfState_.find(attr.toTensor().unsafeGetTensorImpl());
    if (it != execOfState_.end())
      attr = it->second;
  }
  set(node->output(), attr);
  return Status::ok();
}

Status GraphExecutor::runIf(Node *node) {
  c10::IValue cond = get(node->input(0));
  if (!cond.isBool())
    return errorAt(node, "a branch on a value that depends on tensor data; trace with "
                         "--device cpu or make the condition static");
  torch::jit::Block *taken = node->blocks()[cond.toBool() ? 0 : 1];
  NNSC_RETURN_IF_ERROR(runBlock(taken));
  for (size_t i = 0; i < node->outputs().size(); ++i)
    set(node->outputs()[i], get(taken->outputs()[i]));
  return Status::ok();
}

Status GraphExecutor::runLoop(Node *node) {
  c10::IValue trips = get(node->input(0));
  c10::IValue cond = get(node->input(1));
  if (!trips.isInt() || !cond.isBool())
    return errorAt(node, "a loop whose trip count depends on tensor data");
  torch::jit::Block *body = node->blocks()[0];
  std::vector<c10::IValue> carried;
  for (size_t i = 2; i < node->inputs().size(); ++i)
    carried.push_back(get(node->input(i)));
  for (int64_t it = 0; it < trips.toInt() && cond.toBool(); ++it) {
    set(body->inputs()[0], it);
    for (size_t i = 0; i < carried.size(); ++i)
      set(body->inputs()[i + 1], carried[i]);
    NNSC_RETURN_IF_ERROR(runBlock(body));
    cond = get(body->outputs()[0]);
    for (size_t i = 0; i < carried.size(); ++i)
      carried[i] = get(body->outputs()[i + 1]);
    if (!cond.isBool())
      return errorAt(node, "a loop condition that depends on tensor data");
  }
  for (size_t i = 0; i < carried.size(); ++i)
    set(node->outputs()[i], carried[i]);
  return Status::ok();
}

std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

namespace {

// Runs `op` on `stack`; returns the error text of a LibTorch exception.
std::optional<std::string> runSafely(torch::jit::Operation &op, torch::jit::Stack &stack) {
  try {
    op(stack);
  } catch (const c10::Error &e) {
    return std::string(e.what_without_backtrace());
  } catch (const std::exception &e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

} // namespace

// Runs one operator. On the meta device an op that LibTorch has no Meta kernel
// for runs through nnsc's stand-in kernel (MetaStandIns.h), by the dispatcher.
Status GraphExecutor::runOperator(Node *node) {
  std::vector<c10::IValue> inputs;
  for (Value *v : node->inputs())
    inputs.push_back(get(v));
  fixDeviceArgs(node, inputs);
  std::optional<torch::jit::Operation> op;
  try {
    op.emplace(node->getOperation());
  } catch (const c10::Error &e) {
    return errorAt(node,
                   "no implementation for this node: " + firstLine(e.what_without_backtrace()));
  } catch (const std::exception &e) {
    return errorAt(node, "no implementation for this node: " + firstLine(e.what()));
  }
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  auto failure = runSafely(*op, stack);
  if (failure)
    return errorAt(node, firstLine(*failure));
  if (stack.size() < node->outputs().size())
    return errorAt(node, "the operator returned fewer values than the graph expects");
  std::vector<c10::IValue> outputs(stack.end() - node->outputs().size(), stack.end());
  // x.float() on a float32 tensor returns x itself; under mixed precision
  // it converts. The output gets a tensor of its own (a copy, not a view: a
  // view of x would stand for x's newest value), so that later readers of x
  // and of the cast's output stay apart.
  if (const c10::FunctionSchema *schema = node->maybeSchema();
      schema && isDtypeCast(*schema, inputs) && outputs.size() == 1 && outputs[0].isTensor() &&
      inputs[0].isTensor() &&
      outputs[0].toTensor().unsafeGetTensorImpl() == inputs[0].toTensor().unsafeGetTensorImpl())
    outputs[0] = inputs[0].toTensor().clone();
  NNSC_RETURN_IF_ERROR(recordNode(node, inputs, outputs));
  for (size_t i = 0; i < outputs.size(); ++i)
    set(node->outputs()[i], outputs[i]);
  return Status::ok();
}

Status GraphExecutor::bindOutputs(torch::jit::Graph &graph) {
  std::vector<c10::IValue> flat;
  for (Value *v : graph.outputs()) {
    c10::IValue iv = get(v);
    if (iv.isTuple()) {
      for (const auto &e : iv.toTupleRef().elements())
        flat.push_back(e);
    } else {
      flat.push_back(iv);
    }
  }
  for (size_t i = 0; i < flat.size(); ++i) {
    const c10::IValue &iv = flat[i];
    // A list or a nested tuple would drop its tensors from the graph without a word.
    if (iv.isList() || iv.isTuple() || iv.isGenericDict())
      return errorf("{}: error: forward's output {} is a {}: nnsc takes a tensor or a flat tuple "
                    "of tensors (None and numbers are left out); return its tensors in the tuple",
                    out_.source, i, iv.type()->str());
    if (!iv.isTensor())
      continue; // non-tensor results (None, numbers) are not graph outputs
    out_.outputs.push_back(tensorId(iv.toTensor(), "output"));
  }
  if (out_.outputs.empty())
    return errorf("{}: error: forward returns no tensor: nnsc needs one (the loss, a scalar, "
                  "first, for training)",
                  out_.source);
  if (!out_.outputs.empty()) {
    const ir::Tensor &first = out_.tensor(out_.outputs[0]);
    if (first.shape.empty() && ir::isFloatingPoint(first.dtype))
      out_.lossOutput = 0;
  }
  return Status::ok();
}

} // namespace nnsc::trace
