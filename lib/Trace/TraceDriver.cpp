// nnsc-trace's pipeline: load → check the sample inputs against forward →
// execute node by node → annotate → (write graph.pb and weights).
#include "nnsc/Trace/Trace.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "GraphExecutor.h"
#include "MetaStandIns.h"
#include "ModuleLoader.h"
#include "SelfCheck.h"
#include "nnsc/IR/Printer.h"
#include "nnsc/IR/Serialize.h"
#include "nnsc/Ops/OpRegistry.h"
#include "nnsc/Trace/InputSpec.h"

namespace nnsc::trace {

namespace {

std::string forwardSignature(const c10::FunctionSchema &schema) {
  std::string s = "forward(";
  for (size_t i = 1; i < schema.arguments().size(); ++i)
    s += (i > 1 ? ", " : "") + schema.arguments()[i].name();
  return s + ")";
}

// Every forward argument needs an entry with its name, in order.
Status checkSpecAgainstForward(const InputSpec &spec, const c10::FunctionSchema &schema) {
  const auto &args = schema.arguments();
  std::string sig = forwardSignature(schema);
  for (size_t i = 0; i < spec.entries.size(); ++i) {
    const auto &e = spec.entries[i];
    if (i + 1 >= args.size())
      return Status::error(formatError(
          e.pos, fmt::format("input '{}' is one more than the model takes: {}", e.name, sig)));
    if (args[i + 1].name() != e.name)
      return Status::error(formatError(
          e.pos, fmt::format("input #{} is named '{}' but the forward argument is '{}': {}", i + 1,
                             e.name, args[i + 1].name(), sig)));
    if (!args[i + 1].type()->isSubtypeOf(*c10::TensorType::get()))
      return Status::error(
          formatError(e.pos, fmt::format("forward argument '{}' has type {}, not Tensor", e.name,
                                         args[i + 1].type()->str())));
  }
  for (size_t i = spec.entries.size() + 1; i < args.size(); ++i)
    if (!args[i].default_value())
      return Status::error(
          formatError({spec.path, 1, 1},
                      fmt::format("missing input '{}' required by {}", args[i].name(), sig)));
  return Status::ok();
}

std::string humanBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  for (; v >= 1024 && u + 1 < std::size(units); ++u)
    v /= 1024;
  return fmt::format("{:.1f} {}", v, units[u]);
}

// Bytes this machine can still allocate (/proc/meminfo's MemAvailable), or
// nullopt where that is not known.
std::optional<int64_t> availableMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return std::nullopt;
}

// The samples are real CPU tensors whatever the trace device: their bytes
// must fit in this machine's memory, checked before any is made.
Status checkSampleMemory(const InputSpec &spec) {
  auto available = availableMemory();
  if (!available)
    return Status::ok();
  int64_t total = 0;
  for (const auto &e : spec.entries) {
    if (!e.file.empty())
      continue;
    int64_t bytes = ir::numel(e.shape) * ir::dtypeSize(e.dtype); // no overflow: InputSpec checked
    if (bytes > *available - total)
      return Status::error(formatError(
          e.pos, fmt::format("input '{}' of shape {} needs {} for its sample tensor, more than "
                             "the {} this machine has available (samples are made on the CPU "
                             "even when tracing on meta)",
                             e.name, ir::shapeString(e.shape), humanBytes(bytes),
                             humanBytes(*available - total))));
    total += bytes;
  }
  return Status::ok();
}

// Under a failure of the model's forward: what it was given, so a spec of
// the wrong rank or size shows beside the op that refused it.
std::string sampleNote(const InputSpec &spec) {
  std::string note = "note: the forward ran on the sample inputs of " + spec.path + ":";
  for (const auto &e : spec.entries)
    note += fmt::format("\n  {}:{}: '{}' {} {} (forward argument '{}')", spec.path, e.pos.line,
                        e.name, ir::dtypeName(e.dtype), ir::shapeString(e.shape), e.name);
  return note;
}

Expected<at::Tensor> makeSample(const InputSpecEntry &e, at::Generator &gen) {
  if (!e.file.empty())
    return loadTensorFromSafetensors(e.file, e.name, e.pos);
  auto opts = at::TensorOptions().dtype(toScalarType(e.dtype));
  auto [lo, hi] = e.range.value_or(std::make_pair(0.0, ir::isFloatingPoint(e.dtype) ? 1.0 : 2.0));
  if (ir::isFloatingPoint(e.dtype))
    return at::empty(e.shape, opts).uniform_(lo, hi, gen);
  if (e.dtype == ir::DType::Bool)
    return at::randint(0, 2, e.shape, gen, opts);
  return at::randint(static_cast<int64_t>(lo), static_cast<int64_t>(hi), e.shape, gen, opts);
}

// Tensors referenced by no node, input or output are dropped, except
// parameters and buffers (the checkpoint needs all of them).
void pruneUnusedTensors(ir::Graph &g) {
  std::vector<bool> keep(g.tensors().size(), false);
  for (const auto &t : g.tensors())
    keep[t.id] = t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer ||
                 t.kind == ir::TensorKind::Input;
  for (const auto &n : g.nodes()) {
    for (auto i : n.inputs)
      keep[i] = true;
    for (auto o : n.outputs)
      keep[o] = true;
  }
  for (auto o : g.outputs)
    keep[o] = true;
  g.compact(keep);
}

// Views read by nothing: mostly views taken before an in-place write, which
// the trace replays on the written value (Functionalize.cpp). They cost
// nothing and draw no random numbers, so dropping them changes no value.
bool isPureView(const std::string &op) {
  static const std::set<std::string> ops = {
      "aten::slice",     "aten::select",    "aten::view",       "aten::reshape",
      "aten::t",         "aten::transpose", "aten::permute",    "aten::expand",
      "aten::expand_as", "aten::narrow",    "aten::split",      "aten::unbind",
      "aten::chunk",     "aten::squeeze",   "aten::unsqueeze",  "aten::detach",
      "aten::alias",     "aten::diagonal",  "aten::as_strided", "aten::flatten",
      "aten::unflatten", "aten::view_as",   "aten::reshape_as", "aten::split_with_sizes"};
  return ops.count(op) > 0;
}

void dropDeadViews(ir::Graph &g) {
  std::vector<int> readers(g.tensors().size(), 0);
  for (const auto &n : g.nodes())
    for (auto i : n.inputs)
      ++readers[static_cast<size_t>(i)];
  for (auto o : g.outputs)
    ++readers[static_cast<size_t>(o)];
  for (const auto &u : g.stateUpdates)
    ++readers[static_cast<size_t>(u.value)];
  std::vector<bool> dead(g.nodes().size(), false);
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    bool unread = std::all_of(it->outputs.begin(), it->outputs.end(),
                              [&](int64_t o) { return readers[static_cast<size_t>(o)] == 0; });
    if (!unread || !isPureView(it->op))
      continue;
    dead[static_cast<size_t>(it->id)] = true;
    for (auto i : it->inputs)
      --readers[static_cast<size_t>(i)];
  }
  std::vector<ir::Node> kept;
  for (auto &n : g.nodes())
    if (!dead[static_cast<size_t>(n.id)])
      kept.push_back(std::move(n));
  g.nodes() = std::move(kept);
}

std::string className(const torch::jit::Module &m) {
  return m.type()->name() ? m.type()->name()->name() : "Module";
}

int64_t stateBytes(const torch::jit::Module &m) {
  int64_t bytes = 0;
  for (const auto &p : m.named_parameters(/*recurse=*/true))
    bytes += static_cast<int64_t>(p.value.nbytes());
  for (const auto &b : m.named_buffers(/*recurse=*/true))
    bytes += static_cast<int64_t>(b.value.nbytes());
  return bytes;
}

// Runs the self-check when asked and affordable; returns its summary or the
// reason it was skipped.
Expected<std::string> maybeSelfCheck(const TraceOptions &options, torch::jit::Module &module,
                                     torch::jit::Graph &inlined,
                                     const std::vector<at::Tensor> &samples,
                                     const std::vector<std::string> &names, const ir::Graph &g) {
  using Verify = TraceOptions::Verify;
  if (options.verify == Verify::Off)
    return std::string("self-check skipped (--no-verify)");
  if (!g.weightsWritten) {
    if (options.verify == Verify::On)
      return errorf("{}: error: --verify needs real weights, but the archive holds meta tensors",
                    options.modelPath);
    return std::string("self-check skipped: the archive's weights are on the meta device");
  }
  int64_t bytes = stateBytes(module);
  if (options.verify == Verify::Auto && bytes > kSelfCheckAutoBytes)
    return fmt::format("self-check skipped: {} MiB of weights is more than it runs on by "
                       "default (--verify runs it)",
                       bytes >> 20);
  SelfCheckInput in{&module, &inlined, &samples, &names, &g, options.seed};
  return selfCheckTrace(in);
}

} // namespace

Expected<TraceResult> traceModel(const TraceOptions &options) {
  // No autograd while tracing: ops without autograd kernels (user ops) run,
  // and nothing records a backward graph.
  c10::InferenceMode noAutograd;
  if (options.device != "meta" && options.device != "cpu")
    return errorf("error: unknown device '{}'; expected one of: meta, cpu", options.device);
  ops::OpRegistry registry = ops::OpRegistry::builtin();
  if (!options.customOps.empty()) {
    NNSC_RETURN_IF_ERROR(registry.loadUserYaml(options.customOps));
    for (const auto &lib : registry.userLibraries())
      NNSC_RETURN_IF_ERROR(loadOpLibrary(lib));
  }
  auto spec = readInputSpec(options.inputsPath);
  if (!spec)
    return spec.status();
  if (options.device == "meta")
    installMetaStandIns(); // after the user libraries: their ops get one too
  auto loaded = loadModule(options.modelPath);
  if (!loaded)
    return loaded.status();
  torch::jit::Module module = loaded.take();
  if (!module.find_method("forward"))
    return errorf("{}: error: the archive's module has no forward method", options.modelPath);
  torch::jit::Method forward = module.get_method("forward");
  NNSC_RETURN_IF_ERROR(checkSpecAgainstForward(*spec, forward.function().getSchema()));

  NNSC_RETURN_IF_ERROR(checkSampleMemory(*spec));
  at::Generator gen = at::detail::createCPUGenerator(options.seed);
  std::vector<at::Tensor> samples;
  std::vector<std::string> names;
  for (const auto &e : spec->entries) {
    auto t = makeSample(e, gen);
    if (!t)
      return t.status();
    samples.push_back(t.take());
    names.push_back(e.name);
  }

  std::shared_ptr<torch::jit::Graph> graph = forward.graph()->copy();
  torch::jit::Inline(*graph);
  TraceResult result;
  ir::Graph &g = result.graph;
  g.name = className(module);
  g.source = options.modelPath;
  GraphExecutor exec(module, options.device == "meta", g);
  NNSC_RETURN_IF_ERROR(exec.declareState());
  NNSC_RETURN_IF_ERROR(exec.bindInputs(*graph, samples, names));
  if (Status st = exec.run(*graph); !st.isOk())
    return Status::error(st.message() + "\n" + sampleNote(*spec), st.kind());
  result.weightsAvailable = !stateIsMeta(module);
  g.weightsWritten = result.weightsAvailable;
  auto check = maybeSelfCheck(options, module, *graph, samples, names, g);
  if (!check)
    return check.status();
  result.selfCheck = check.take();
  dropDeadViews(g);
  pruneUnusedTensors(g);

  auto unannotated = ops::annotateGraph(g, registry);
  if (!unannotated)
    return unannotated.status();
  for (const auto &u : *unannotated)
    result.warnings.push_back(fmt::format("{} has no partition annotation: replicate-only "
                                          "(first at {}, {} node{})",
                                          u.op, u.loc, u.count, u.count == 1 ? "" : "s"));
  return result;
}

Status runTrace(const TraceOptions &options, const std::string &outDir, bool print,
                std::ostream &out, std::ostream &log) {
  auto result = traceModel(options);
  if (!result)
    return result.status();
  for (const auto &w : result->warnings)
    log << "nnsc-trace: warning: " << w << '\n';
  log << "nnsc-trace: " << result->selfCheck << '\n';
  if (!outDir.empty()) {
    NNSC_RETURN_IF_ERROR(writeTraceOutputs(options, *result, outDir));
    log << fmt::format("nnsc-trace: wrote {}/graph.pb ({} nodes, {} tensors)", outDir,
                       result->graph.nodes().size(), result->graph.tensors().size());
    log << (result->weightsAvailable
                ? fmt::format(" and {}/weights.safetensors\n", outDir)
                : std::string("; no weights written: the archive holds meta tensors\n"));
  }
  if (print)
    ir::printGraph(result->graph, out);
  return Status::ok();
}

Status printGraphFile(const std::string &path, std::ostream &out) {
  auto g = ir::readGraph(path);
  if (!g)
    return g.status();
  ir::printGraph(*g, out);
  return Status::ok();
}

} // namespace nnsc::trace
