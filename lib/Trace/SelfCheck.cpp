#include "SelfCheck.h"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <torch/csrc/jit/runtime/graph_executor.h>

#include "GraphExecutor.h"
#include "GraphInterpreter.h"
#include "nnsc/IR/Printer.h"

namespace nnsc::trace {

namespace {

constexpr double kRelTolerance = 1e-5; // of the reference's largest magnitude

// How far `got` is from `want`: 0 when equal within tolerance, else the
// largest absolute difference (infinity for a shape or dtype mismatch).
double difference(const at::Tensor &got, const at::Tensor &want) {
  if (got.sizes() != want.sizes() || got.scalar_type() != want.scalar_type())
    return std::numeric_limits<double>::infinity();
  if (got.numel() == 0)
    return 0;
  if (!at::isFloatingType(want.scalar_type()) && !at::isComplexType(want.scalar_type()))
    return got.equal(want)
               ? 0
               : (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  at::Tensor bothNan = g.isnan() & w.isnan();
  at::Tensor diff =
      (g - w).abs().masked_fill(bothNan, 0).nan_to_num(std::numeric_limits<double>::infinity());
  double worst = diff.max().item<double>();
  double scale = std::max(1.0, w.abs().masked_fill(w.isnan(), 0).max().item<double>());
  return worst <= kRelTolerance * scale ? 0 : worst;
}

// Ops whose result has no defined values (uninitialized memory).
bool hasUnspecifiedValues(const std::string &op) {
  return op == "aten::empty" || op == "aten::empty_like" || op == "aten::new_empty" ||
         op == "aten::empty_strided" || op == "aten::new_empty_strided";
}

std::string shapeText(const at::Tensor &t) {
  return fmt::format("{}{}", c10::toString(t.scalar_type()), fmt::join(t.sizes(), "x"));
}

std::string where(const ir::Node &n) {
  return fmt::format("node %{} ({}){} at {}", n.id, n.op,
                     n.modulePath.empty() ? "" : " in " + n.modulePath + " (" + n.moduleClass + ")",
                     n.locString());
}

// The first line where two graph texts differ, for a meta/cpu mismatch.
std::string firstDifference(const ir::Graph &a, const ir::Graph &b) {
  std::istringstream sa(ir::printGraph(a)), sb(ir::printGraph(b));
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ea = !std::getline(sa, la), eb = !std::getline(sb, lb);
    if (ea && eb)
      return "";
    if (ea || eb || la != lb)
      return fmt::format("line {}: meta trace '{}' vs cpu trace '{}'", line, ea ? "<end>" : la,
                         eb ? "<end>" : lb);
  }
}

struct CpuTrace {
  ir::Graph graph;
  TensorValues snapshots;
  std::unordered_map<int64_t, at::Tensor> state;
};

Status traceOnCpu(const SelfCheckInput &in, CpuTrace &out) {
  at::manual_seed(in.seed);
  std::vector<at::Tensor> samples;
  for (const at::Tensor &s : *in.samples)
    samples.push_back(s.clone());
  GraphExecutor exec(*in.module, /*meta=*/false, out.graph);
  exec.keepSnapshots(&out.snapshots);
  NNSC_RETURN_IF_ERROR(exec.declareState());
  NNSC_RETURN_IF_ERROR(exec.bindInputs(*in.inlined, samples, *in.names));
  NNSC_RETURN_IF_ERROR(exec.run(*in.inlined));
  out.state = exec.stateTensors();
  return Status::ok();
}

Expected<TensorValues> startingValues(const SelfCheckInput &in, const CpuTrace &cpu) {
  TensorValues values;
  for (size_t i = 0; i < cpu.graph.inputs.size(); ++i)
    values[cpu.graph.inputs[i]] = (*in.samples)[i].clone();
  for (const ir::Tensor &t : cpu.graph.tensors()) {
    if (t.kind == ir::TensorKind::Param)
      values[t.id] = cpu.state.at(t.id).detach();
    else if (t.kind == ir::TensorKind::Buffer)
      values[t.id] = cpu.state.at(t.id).detach().clone();
    else if (t.kind == ir::TensorKind::Constant) {
      auto it = cpu.snapshots.find(t.id);
      if (it == cpu.snapshots.end())
        return Status::internal(fmt::format("constant %{} has no value to check with", t.id));
      values[t.id] = it->second;
    }
  }
  return values;
}

std::vector<at::Tensor> flattenOutputs(const c10::IValue &v) {
  std::vector<at::Tensor> out;
  if (v.isTuple()) {
    for (const auto &e : v.toTupleRef().elements())
      if (e.isTensor())
        out.push_back(e.toTensor());
  } else if (v.isTensor()) {
    out.push_back(v.toTensor());
  }
  return out;
}

// The module's own forward on a fresh copy: outputs and buffers afterwards.
struct Reference {
  std::vector<at::Tensor> outputs;
  std::map<std::string, at::Tensor> buffers;
};

Expected<Reference> runReference(const SelfCheckInput &in) {
  Reference ref;
  try {
    torch::jit::Module copy = in.module->deepcopy();
    torch::jit::GraphOptimizerEnabledGuard plain(false);
    std::vector<c10::IValue> args;
    for (const at::Tensor &s : *in.samples)
      args.emplace_back(s.clone());
    at::manual_seed(in.seed);
    ref.outputs = flattenOutputs(copy.forward(args));
    for (const auto &b : copy.named_buffers(/*recurse=*/true))
      ref.buffers[b.name] = b.value;
  } catch (const std::exception &e) {
    std::string what = e.what();
    return errorf("error: the archive's own forward fails on the sample inputs: {}",
                  what.substr(0, what.find('\n')));
  }
  return ref;
}

Status compareEnd(const ir::Graph &g, const TensorValues &values, const Reference &ref) {
  size_t i = 0;
  for (; i < g.outputs.size() && i < ref.outputs.size(); ++i) {
    double d = difference(values.at(g.outputs[i]), ref.outputs[i]);
    if (d != 0)
      return errorf("error: trace self-check failed: output #{} of the traced graph differs "
                    "from the model's by {} ({} vs {})",
                    i, d, shapeText(values.at(g.outputs[i])), shapeText(ref.outputs[i]));
  }
  if (g.outputs.size() != ref.outputs.size())
    return errorf("error: trace self-check failed: the traced graph returns {} tensors, the "
                  "model {}",
                  g.outputs.size(), ref.outputs.size());
  std::map<int64_t, int64_t> updated;
  for (const ir::StateUpdate &u : g.stateUpdates)
    updated[u.state] = u.value;
  for (const ir::Tensor &t : g.tensors()) {
    if (t.kind != ir::TensorKind::Buffer || !ref.buffers.count(t.name))
      continue;
    auto u = updated.find(t.id);
    const at::Tensor &ours = values.at(u == updated.end() ? t.id : u->second);
    double d = difference(ours, ref.buffers.at(t.name));
    if (d != 0)
      return errorf("error: trace self-check failed: buffer '{}' after the forward differs from "
                    "the model's by {}{}",
                    t.name, d,
                    u == updated.end() ? " (the traced graph does not update it)"
                                       : fmt::format(" (updated from %{})", u->second));
  }
  return Status::ok();
}

} // namespace

Expected<std::string> selfCheckTrace(const SelfCheckInput &in) {
  CpuTrace cpu;
  NNSC_RETURN_IF_ERROR(traceOnCpu(in, cpu).withContext("self-check: tracing on cpu"));
  cpu.graph.name = in.traced->name;
  cpu.graph.source = in.traced->source;
  cpu.graph.weightsWritten = in.traced->weightsWritten;
  std::string diff = firstDifference(*in.traced, cpu.graph);
  if (!diff.empty())
    return errorf("error: trace self-check failed: the meta-device trace differs from a cpu "
                  "trace at {}",
                  diff);
  auto values = startingValues(in, cpu);
  if (!values)
    return values.status();
  at::manual_seed(in.seed);
  size_t compared = 0;
  Status st = interpretGraph(cpu.graph, *values, [&](const ir::Node &n) {
    for (int64_t o : n.outputs) {
      auto snap = cpu.snapshots.find(o);
      if (snap == cpu.snapshots.end())
        continue; // a node the trace added (a scatter carrying a write back)
      if (hasUnspecifiedValues(n.op)) {
        (*values)[o] = snap->second; // later readers see LibTorch's bytes
        continue;
      }
      double d = difference(values->at(o), snap->second);
      ++compared;
      if (d != 0)
        return errorf("{}: error: trace self-check failed: {} computes %{} differently from "
                      "LibTorch executing the archive (largest difference {}); an earlier "
                      "write or update the graph missed reaches here first",
                      n.locString(), where(n), o, d);
    }
    return Status::ok();
  });
  NNSC_RETURN_IF_ERROR(st);
  auto ref = runReference(in);
  if (!ref)
    return ref.status();
  NNSC_RETURN_IF_ERROR(compareEnd(cpu.graph, *values, *ref));
  auto count = [](size_t n, const char *what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  return fmt::format("self-check passed: {} ({} compared), {} and {} match LibTorch running the "
                     "archive",
                     count(cpu.graph.nodes().size(), "node"), count(compared, "value"),
                     count(ref->outputs.size(), "output"), count(ref->buffers.size(), "buffer"));
}

} // namespace nnsc::trace
