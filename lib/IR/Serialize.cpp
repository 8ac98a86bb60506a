#include "nnsc/IR/Serialize.h"

#include <algorithm>
#include <limits>

#include "nnsc/Support/File.h"
#include "nnsc/graph.pb.h"

namespace nnsc::ir {

namespace {

// The proto enum and ir::DType list the same types in the same order.
proto::DType toProtoDType(DType t) { return static_cast<proto::DType>(static_cast<int>(t)); }
DType fromProtoDType(int t) { return static_cast<DType>(t); }

struct ArgToProto {
  proto::Argument &out;
  void operator()(const NoneValue &) { out.set_none(true); }
  void operator()(bool v) { out.set_b(v); }
  void operator()(int64_t v) { out.set_i(v); }
  void operator()(double v) { out.set_f(v); }
  void operator()(const std::string &v) { out.set_s(v); }
  // An empty list must still select its case of the oneof: `stride=[]` is
  // not `stride=None` (max_pool2d reads the two differently).
  void operator()(const std::vector<int64_t> &v) {
    auto *l = out.mutable_ints();
    for (auto x : v)
      l->add_values(x);
  }
  void operator()(const std::vector<double> &v) {
    auto *l = out.mutable_floats();
    for (auto x : v)
      l->add_values(x);
  }
  void operator()(const std::vector<bool> &v) {
    auto *l = out.mutable_bools();
    for (bool x : v)
      l->add_values(x);
  }
  void operator()(DType v) { out.set_dtype(toProtoDType(v)); }
  void operator()(const DeviceValue &v) { out.set_device(v.name); }
  void operator()(const TensorRef &v) { out.set_tensor(v.index); }
  void operator()(const TensorListRef &v) {
    auto *l = out.mutable_tensors();
    for (auto x : v.indices)
      l->add_values(x);
  }
};

ArgValue argFromProto(const proto::Argument &a) {
  switch (a.value_case()) {
  case proto::Argument::kTensor:
    return TensorRef{a.tensor()};
  case proto::Argument::kTensors:
    return TensorListRef{{a.tensors().values().begin(), a.tensors().values().end()}};
  case proto::Argument::kB:
    return a.b();
  case proto::Argument::kI:
    return a.i();
  case proto::Argument::kF:
    return a.f();
  case proto::Argument::kS:
    return a.s();
  case proto::Argument::kInts:
    return std::vector<int64_t>(a.ints().values().begin(), a.ints().values().end());
  case proto::Argument::kFloats:
    return std::vector<double>(a.floats().values().begin(), a.floats().values().end());
  case proto::Argument::kBools:
    return std::vector<bool>(a.bools().values().begin(), a.bools().values().end());
  case proto::Argument::kDtype:
    return fromProtoDType(a.dtype());
  case proto::Argument::kDevice:
    return DeviceValue{a.device()};
  default:
    return NoneValue{};
  }
}

void tensorToProto(const Tensor &t, proto::Tensor &p) {
  p.set_id(t.id);
  p.set_name(t.name);
  for (auto d : t.shape)
    p.add_shape(d);
  p.set_dtype(toProtoDType(t.dtype));
  p.set_requires_grad(t.requiresGrad);
  p.set_kind(static_cast<proto::TensorKind>(static_cast<int>(t.kind) + 1));
  for (const auto &a : t.aliases)
    p.add_aliases(a);
  p.set_data(t.data);
}

Tensor tensorFromProto(const proto::Tensor &p) {
  Tensor t;
  t.name = p.name();
  t.shape.assign(p.shape().begin(), p.shape().end());
  t.dtype = fromProtoDType(p.dtype());
  t.requiresGrad = p.requires_grad();
  t.kind = static_cast<TensorKind>(std::max(0, static_cast<int>(p.kind()) - 1));
  t.aliases.assign(p.aliases().begin(), p.aliases().end());
  t.data = p.data();
  return t;
}

void nodeToProto(const Node &n, proto::Node &p) {
  p.set_id(n.id);
  p.set_op(n.op);
  p.set_overload(n.overload);
  for (auto i : n.inputs)
    p.add_inputs(i);
  for (auto o : n.outputs)
    p.add_outputs(o);
  for (const auto &a : n.args) {
    auto *pa = p.add_args();
    pa->set_name(a.name);
    std::visit(ArgToProto{*pa}, a.value);
  }
  for (const auto &s : n.annotations)
    p.add_annotations(s);
  p.set_module_path(n.modulePath);
  p.set_module_class(n.moduleClass);
  for (const ModuleFrame &f : n.moduleStack) {
    auto *pf = p.add_module_stack();
    pf->set_path(f.path);
    pf->set_class_name(f.cls);
  }
  p.mutable_loc()->set_file(n.loc.file);
  p.mutable_loc()->set_line(n.loc.line);
  p.mutable_loc()->set_col(n.loc.col);
}

Node nodeFromProto(const proto::Node &p) {
  Node n;
  n.op = p.op();
  n.overload = p.overload();
  n.inputs.assign(p.inputs().begin(), p.inputs().end());
  n.outputs.assign(p.outputs().begin(), p.outputs().end());
  for (const auto &a : p.args())
    n.args.push_back({a.name(), argFromProto(a)});
  n.annotations.assign(p.annotations().begin(), p.annotations().end());
  n.modulePath = p.module_path();
  n.moduleClass = p.module_class();
  for (const auto &f : p.module_stack())
    n.moduleStack.push_back({f.path(), f.class_name()});
  n.loc = {p.loc().file(), p.loc().line(), p.loc().col()};
  return n;
}

// Sizes the planner multiplies and the loss it trains on, checked once here:
// a shape whose bytes overflow 64 bits would be priced as nothing.
Status checkShapesAndLoss(const Graph &g) {
  for (const auto &t : g.tensors()) {
    uint64_t bytes = std::max<int64_t>(1, dtypeSize(t.dtype));
    for (int64_t d : t.shape) {
      if (d < 0)
        return errorf("tensor %{} '{}' has shape {}: a negative dimension", t.id, t.name,
                      shapeString(t.shape));
      if (d != 0 && bytes > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d))
        return errorf("tensor %{} '{}' has shape {} whose size overflows 64 bits", t.id, t.name,
                      shapeString(t.shape));
      bytes *= uint64_t(d);
    }
  }
  if (g.lossOutput < -1 || g.lossOutput >= int64_t(g.outputs.size()))
    return errorf("loss_output {} names no output (the graph has {}); expected -1 or 0..{}",
                  g.lossOutput, g.outputs.size(), int64_t(g.outputs.size()) - 1);
  return Status::ok();
}

Status checkIds(const Graph &g) {
  auto n = static_cast<int64_t>(g.tensors().size());
  auto bad = [n](const std::vector<int64_t> &ids) {
    for (auto id : ids)
      if (id < 0 || id >= n)
        return true;
    return false;
  };
  for (const auto &node : g.nodes())
    if (bad(node.inputs) || bad(node.outputs))
      return errorf("node %{} ({}) refers to a tensor id that does not exist", node.id, node.op);
  if (bad(g.inputs) || bad(g.outputs))
    return errorf("graph inputs or outputs refer to a tensor id that does not exist");
  for (const auto &u : g.stateUpdates) {
    if (bad({u.state, u.value}))
      return errorf("a state update refers to a tensor id that does not exist");
    if (g.tensor(u.state).kind != TensorKind::Buffer)
      return errorf("a state update writes %{} '{}', which is not a buffer", u.state,
                    g.tensor(u.state).name);
  }
  return Status::ok();
}

} // namespace

void toProto(const Graph &graph, proto::Graph &out) {
  out.set_format_version(Graph::kFormatVersion);
  out.set_name(graph.name);
  out.set_source(graph.source);
  for (const auto &t : graph.tensors())
    tensorToProto(t, *out.add_tensors());
  for (const auto &n : graph.nodes())
    nodeToProto(n, *out.add_nodes());
  for (auto i : graph.inputs)
    out.add_inputs(i);
  for (auto o : graph.outputs)
    out.add_outputs(o);
  out.set_loss_output(graph.lossOutput);
  out.set_weights_written(graph.weightsWritten);
  for (const auto &u : graph.stateUpdates) {
    proto::StateUpdate *p = out.add_state_updates();
    p->set_state(u.state);
    p->set_value(u.value);
  }
}

Expected<Graph> fromProto(const proto::Graph &in) {
  if (in.format_version() == 0 || in.format_version() > Graph::kFormatVersion)
    return errorf("unsupported graph format version {} (this build reads 1..{})",
                  in.format_version(), Graph::kFormatVersion);
  Graph g;
  g.name = in.name();
  g.source = in.source();
  for (const auto &t : in.tensors())
    g.addTensor(tensorFromProto(t));
  for (const auto &n : in.nodes())
    g.addNode(nodeFromProto(n));
  g.inputs.assign(in.inputs().begin(), in.inputs().end());
  g.outputs.assign(in.outputs().begin(), in.outputs().end());
  g.lossOutput = in.loss_output();
  g.weightsWritten = in.weights_written();
  for (const auto &u : in.state_updates())
    g.stateUpdates.push_back({u.state(), u.value()});
  NNSC_RETURN_IF_ERROR(checkIds(g));
  NNSC_RETURN_IF_ERROR(checkShapesAndLoss(g));
  return g;
}

Status writeGraph(const Graph &graph, const std::string &path) {
  proto::Graph p;
  toProto(graph, p);
  std::string bytes;
  if (!p.SerializeToString(&bytes))
    return Status::internal("cannot serialize graph for " + path);
  return writeFileAtomic(path, bytes);
}

Expected<Graph> readGraph(const std::string &path) {
  auto bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  return parseGraph(*bytes, path);
}

Expected<Graph> parseGraph(const std::string &bytes, const std::string &path) {
  proto::Graph p;
  if (!p.ParseFromString(bytes))
    return errorf("{}: error: not an nnsc graph (protobuf parse failed; truncated or another "
                  "format?)",
                  path);
  // A plan or a manifest parses too (unknown fields are kept aside), but
  // no graph lacks tensors.
  if (p.tensors().empty())
    return errorf("{}: error: not an nnsc graph (it has no tensors; a plan or a manifest?)", path);
  // Protobuf has no end marker: a file cut at a field boundary parses. Every
  // traced forward returns something, and its outputs are written after the
  // tensors and nodes, so a graph without them was cut short.
  if (p.outputs().empty())
    return errorf("{}: error: not an nnsc graph: it has tensors but no outputs (a file cut "
                  "short?)",
                  path);
  auto g = fromProto(p);
  if (!g)
    return Status::error(path + ": error: " + g.status().message());
  return g;
}

} // namespace nnsc::ir
