// Program: compiles rank programs with LibTorch's TorchScript frontend and
// turns its exceptions into located errors.
#include "nnsc/Runtime/Program.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/frontend/parser.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "nnsc/Ops/MixedPrecisionOps.h"
#include "nnsc/Runtime/Collectives.h"

namespace nnsc::rt {

namespace {

using torch::jit::BuiltinModule;
using torch::jit::GraphFunction;
using torch::jit::SourceRange;
using torch::jit::SugaredValue;
using SugaredPtr = std::shared_ptr<SugaredValue>;

SugaredPtr constant(GraphFunction &m, const SourceRange &loc, const c10::IValue &value) {
  return std::make_shared<torch::jit::SimpleValue>(m.graph()->insertConstant(value, loc));
}

// `torch.ops.<ns>.<op>`: any registered operator namespace.
struct OpsNamespaces : SugaredValue {
  std::string kind() const override { return "torch.ops"; }
  SugaredPtr attr(const SourceRange &, GraphFunction &, const std::string &ns) override {
    return std::make_shared<BuiltinModule>(ns);
  }
};

// `torch.X` is aten::X, except the dtypes and memory formats (constants, as
// in Python TorchScript) and `torch.ops`.
struct TorchModule : BuiltinModule {
  TorchModule() : BuiltinModule("aten") {}
  SugaredPtr attr(const SourceRange &loc, GraphFunction &m, const std::string &field) override {
    static const std::map<std::string, at::ScalarType> dtypes = {{"float32", at::kFloat},
                                                                 {"float", at::kFloat},
                                                                 {"float64", at::kDouble},
                                                                 {"double", at::kDouble},
                                                                 {"float16", at::kHalf},
                                                                 {"half", at::kHalf},
                                                                 {"bfloat16", at::kBFloat16},
                                                                 {"int64", at::kLong},
                                                                 {"long", at::kLong},
                                                                 {"int32", at::kInt},
                                                                 {"int", at::kInt},
                                                                 {"int16", at::kShort},
                                                                 {"short", at::kShort},
                                                                 {"int8", at::kChar},
                                                                 {"uint8", at::kByte},
                                                                 {"bool", at::kBool},
                                                                 {"complex64", at::kComplexFloat}};
    static const std::map<std::string, at::MemoryFormat> formats = {
        {"contiguous_format", at::MemoryFormat::Contiguous},
        {"preserve_format", at::MemoryFormat::Preserve},
        {"channels_last", at::MemoryFormat::ChannelsLast}};
    if (auto it = dtypes.find(field); it != dtypes.end())
      return constant(m, loc, it->second);
    if (auto it = formats.find(field); it != formats.end())
      return constant(m, loc, it->second);
    if (field == "ops")
      return std::make_shared<OpsNamespaces>();
    return BuiltinModule::attr(loc, m, field);
  }
};

// `math.X` is aten::X (math.sqrt, math.log, ...) except its constants.
struct MathModule : BuiltinModule {
  MathModule() : BuiltinModule("aten") {}
  SugaredPtr attr(const SourceRange &loc, GraphFunction &m, const std::string &field) override {
    static const std::map<std::string, double> constants = {
        {"pi", M_PI},
        {"e", M_E},
        {"tau", 2 * M_PI},
        {"inf", std::numeric_limits<double>::infinity()},
        {"nan", std::numeric_limits<double>::quiet_NaN()}};
    if (auto it = constants.find(field); it != constants.end())
      return constant(m, loc, it->second);
    return BuiltinModule::attr(loc, m, field);
  }
};

// `torch`, `math`, and any operator namespace (`nnsc` for our collectives, a
// user's TORCH_LIBRARY namespace); everything else, types included, is left
// to TorchScript's defaults.
struct ProgramResolver : torch::jit::Resolver {
  SugaredPtr resolveValue(const std::string &name, GraphFunction &, const SourceRange &) override {
    if (name == "torch")
      return std::make_shared<TorchModule>();
    if (name == "math")
      return std::make_shared<MathModule>();
    if (isOperatorNamespace(name))
      return std::make_shared<BuiltinModule>(name);
    return nullptr;
  }
  c10::TypePtr resolveType(const std::string &, const SourceRange &) override { return nullptr; }

private:
  bool isOperatorNamespace(const std::string &name) {
    if (namespaces_.empty())
      for (const c10::OperatorName &op : c10::Dispatcher::singleton().getAllOpNames())
        namespaces_.insert(op.name.substr(0, op.name.find("::")));
    return namespaces_.count(name) > 0;
  }
  std::set<std::string> namespaces_;
};

std::string trimRight(std::string s, const char *chars = " \n\t:") {
  s.erase(s.find_last_not_of(chars) + 1);
  return s;
}

std::string trimLeft(const std::string &s) {
  size_t start = s.find_first_not_of("\n");
  return start == std::string::npos ? "" : s.substr(start);
}

// TorchScript compile errors read "<message>:\n  File "f", line N\n<excerpt>".
std::string compileError(const std::string &what, const std::string &fileName) {
  static const std::regex location(R"re(\n\s*File "([^"]*)", line (\d+)[^\n]*\n)re");
  std::string text = trimLeft(what);
  std::smatch m;
  if (!std::regex_search(text, m, location))
    return fmt::format("{}: error: {}", fileName, trimRight(text));
  return fmt::format("{}:{}: error: {}\n{}", m[1].str(), m[2].str(), trimRight(m.prefix().str()),
                     trimRight(m.suffix().str(), " \n"));
}

// Interpreter errors read "The following operation failed ...\nTraceback
// ...\n  File "f", line N, in fn\n<excerpt>\nRuntimeError: <message>".
std::string runtimeError(const std::string &what, const std::string &fileName,
                         const std::string &function) {
  static const std::regex frame(R"re(\n\s*File "([^"]*)", line (\d+), in (\w+)\n)re");
  static const std::regex kind(R"re(\n(\w+(Error|Exception)): )re");
  std::string last, file = fileName, line, fn = function, rest = what;
  for (std::smatch m; std::regex_search(rest, m, frame); rest = m.suffix().str()) {
    file = m[1].str();
    line = m[2].str();
    fn = m[3].str();
  }
  std::smatch k;
  std::string excerpt, message = trimLeft(rest);
  if (!line.empty() && std::regex_search(rest, k, kind)) {
    excerpt = trimRight(k.prefix().str(), " \n");
    message = k.suffix().str();
  }
  message = trimRight(message.substr(0, message.find("\nException raised from")), " \n");
  std::string where = line.empty() ? file : file + ":" + line;
  std::string out = fmt::format("{}: error: in {}: {}", where, fn, message);
  return excerpt.empty() ? out : out + "\n" + excerpt;
}

void flatten(const c10::IValue &value, std::vector<at::Tensor> &out) {
  if (value.isTensor())
    out.push_back(value.toTensor());
  else if (value.isTuple())
    for (const c10::IValue &v : value.toTupleRef().elements())
      flatten(v, out);
  else if (value.isList())
    for (const c10::IValue &v : value.toListRef())
      flatten(v, out);
  else if (value.isNone())
    out.emplace_back();
  else if (value.isDouble())
    out.push_back(at::scalar_tensor(value.toDouble(), at::kDouble));
  else if (value.isInt())
    out.push_back(at::scalar_tensor(value.toInt(), at::kLong));
  else if (value.isBool())
    out.push_back(at::scalar_tensor(value.toBool(), at::kBool));
  else
    throw std::runtime_error("the program returned a " + value.tagKind() +
                             ", expected tensors, numbers, None, tuples or lists of them");
}

thread_local const Program *currentProgram = nullptr;
thread_local Program::Mode currentRunMode = Program::Mode::Train;

// Makes `program` and `mode` current for the scope of one run().
class CurrentProgram {
public:
  CurrentProgram(const Program *program, Program::Mode mode)
      : outer_(currentProgram), outerMode_(currentRunMode) {
    currentProgram = program;
    currentRunMode = mode;
  }
  ~CurrentProgram() {
    currentProgram = outer_;
    currentRunMode = outerMode_;
  }
  CurrentProgram(const CurrentProgram &) = delete;
  CurrentProgram &operator=(const CurrentProgram &) = delete;

private:
  const Program *outer_;
  Program::Mode outerMode_;
};

// The operators whose boolean argument at `index` says train mode.
const std::map<std::string, size_t> &trainFlags() {
  static const std::map<std::string, size_t> flags = {
      {"aten::dropout", 2},           {"aten::dropout_", 2},
      {"aten::feature_dropout", 2},   {"aten::feature_dropout_", 2},
      {"aten::alpha_dropout", 2},     {"aten::alpha_dropout_", 2},
      {"aten::feature_alpha_dropout", 2}, {"aten::feature_alpha_dropout_", 2},
      {"aten::native_dropout", 2},    {"aten::batch_norm", 5},
      {"aten::native_batch_norm", 5}, {"aten::rrelu", 3}};
  return flags;
}

// The operators whose float argument at `index` is a dropout probability that
// the module computes as `p if self.training else 0.0` (nanoGPT's attention):
// a train-mode trace holds p there, which eval mode must not apply.
const std::map<std::string, size_t> &dropoutProbabilities() {
  static const std::map<std::string, size_t> probabilities = {
      {"aten::scaled_dot_product_attention", 4},
      {"aten::_scaled_dot_product_flash_attention", 3},
      {"aten::_scaled_dot_product_efficient_attention", 5},
      {"aten::_scaled_dot_product_cudnn_attention", 5}};
  return probabilities;
}

// Sets every train flag of `block` (and its nested blocks) to False and every
// dropout probability of attention to 0, and drops the writes into the
// function's arguments: a traced train-mode step writes its buffers back with
// `p.copy_(...)` (num_batches_tracked += 1), which an eval-mode module does not.
void setEvalFlags(torch::jit::Graph &graph, torch::jit::Block *block) {
  std::vector<torch::jit::Node *> writes;
  for (torch::jit::Node *node : block->nodes()) {
    for (torch::jit::Block *inner : node->blocks())
      setEvalFlags(graph, inner);
    if (node->kind() == c10::Symbol::fromQualString("aten::copy_") &&
        node->input(0)->node()->kind() == c10::prim::Param)
      writes.push_back(node);
    const char *op = node->kind().toQualString();
    torch::jit::WithInsertPoint here(node);
    if (auto flag = trainFlags().find(op);
        flag != trainFlags().end() && node->inputs().size() > flag->second)
      node->replaceInput(flag->second, graph.insertConstant(false));
    if (auto p = dropoutProbabilities().find(op);
        p != dropoutProbabilities().end() && node->inputs().size() > p->second)
      node->replaceInput(p->second, graph.insertConstant(0.0));
  }
  for (torch::jit::Node *write : writes) {
    write->output()->replaceAllUsesWith(write->input(0));
    write->destroy();
  }
}

bool isLossOp(const torch::jit::Node *node) { return ops::isLossOp(node->kind().toQualString()); }

// A log_softmax that only feeds losses (log_softmax + nll_loss).
bool isLossLogSoftmax(const torch::jit::Node *node) {
  if (!ops::isLogSoftmax(node->kind().toQualString()))
    return false;
  const auto &uses = node->output()->uses();
  return !uses.empty() && std::all_of(uses.begin(), uses.end(), [](const torch::jit::Use &u) {
    return isLossOp(u.user);
  });
}

// Mixed precision's casts: each is the identity on a tensor already in its
// dtype (or not floating), so inserting it where it does nothing costs a call.
const c10::Symbol &toFullPrecision() {
  static const c10::Symbol op = c10::Symbol::fromQualString("aten::_autocast_to_full_precision");
  return op;
}

const c10::Symbol &toReducedPrecision() {
  static const c10::Symbol op = c10::Symbol::fromQualString("aten::_autocast_to_reduced_precision");
  return op;
}

// Passes every tensor input of the nodes `pick` selects in `block` (and its
// nested blocks) through a `cast` node whose other arguments `extra` makes
// (at the insertion point), unless the input comes out of one already;
// returns how many nodes it changed.
int castInputs(torch::jit::Graph &graph, torch::jit::Block *block,
               const std::function<bool(const torch::jit::Node *)> &pick, c10::Symbol cast,
               const std::function<std::vector<torch::jit::Value *>()> &extra) {
  int changed = 0;
  for (torch::jit::Node *node : block->nodes()) {
    for (torch::jit::Block *inner : node->blocks())
      changed += castInputs(graph, inner, pick, cast, extra);
    if (!pick(node))
      continue;
    bool any = false;
    for (size_t i = 0; i < node->inputs().size(); ++i) {
      torch::jit::Value *in = node->input(i);
      // (Neither Type::cast nor Value::setType here: on 2.x both inline a
      // DynamicType path whose typeinfo LibTorch does not export, and UBSan's
      // vptr check needs it to link.)
      if (in->type()->kind() != c10::TypeKind::TensorType || in->node()->kind() == cast)
        continue;
      torch::jit::WithInsertPoint here(node);
      std::vector<torch::jit::Value *> args{in};
      for (torch::jit::Value *v : extra())
        args.push_back(v);
      // Its output is a Tensor value, the type a new node's output starts with.
      torch::jit::Node *c = graph.insertNode(graph.create(cast, args));
      node->replaceInput(i, c->output());
      any = true;
    }
    changed += any;
  }
  return changed;
}

} // namespace

struct Program::EvalForms {
  std::mutex mutex;
  std::map<std::string, torch::jit::Function *> made;
};

const Program *Program::current() { return currentProgram; }

Program::Mode Program::currentMode() { return currentRunMode; }

torch::jit::Function &Program::evalForm(const std::string &function) const {
  std::lock_guard<std::mutex> lock(evalForms_->mutex);
  auto &made = evalForms_->made[function];
  if (!made) {
    std::shared_ptr<torch::jit::Graph> graph =
        torch::jit::toGraphFunction(unit_->get_function(function)).graph()->copy();
    torch::jit::Inline(*graph);
    setEvalFlags(*graph, graph->block());
    made = unit_->create_function(c10::QualifiedName("__nnsc_eval__." + function), graph);
  }
  return *made;
}

int Program::castFunctionInputs(
    const std::function<bool(const torch::jit::Node *)> &pick, c10::Symbol cast,
    const std::function<std::vector<torch::jit::Value *>(torch::jit::Graph &)> &extra) {
  int changed = 0;
  for (const std::string &name : functions_) {
    std::shared_ptr<torch::jit::Graph> graph =
        torch::jit::toGraphFunction(unit_->get_function(name)).graph();
    changed += castInputs(*graph, graph->block(), pick, cast, [&] { return extra(*graph); });
  }
  return changed;
}

int Program::computeLossesInFloat32() {
  auto pick = [](const torch::jit::Node *n) { return isLossOp(n) || isLossLogSoftmax(n); };
  return castFunctionInputs(pick, toFullPrecision(), [](torch::jit::Graph &g) {
    torch::jit::Value *yes = g.insertConstant(true);
    return std::vector<torch::jit::Value *>{yes, yes};
  });
}

int Program::computeAutocastFloat32Ops() {
  auto pick = [](const torch::jit::Node *n) {
    return ops::isAutocastFloat32Op(n->kind().toQualString());
  };
  return castFunctionInputs(pick, toFullPrecision(), [](torch::jit::Graph &g) {
    torch::jit::Value *yes = g.insertConstant(true);
    return std::vector<torch::jit::Value *>{yes, yes};
  });
}

int Program::computeMatmulsIn(at::ScalarType low) {
  auto pick = [](const torch::jit::Node *n) {
    return ops::isLowPrecisionOp(n->kind().toQualString());
  };
  return castFunctionInputs(pick, toReducedPrecision(), [low](torch::jit::Graph &g) {
    torch::jit::Value *yes = g.insertConstant(true);
    torch::jit::Value *dtype = g.insertConstant(static_cast<int64_t>(low));
    return std::vector<torch::jit::Value *>{yes, yes, dtype, dtype};
  });
}

Expected<Program> Program::compile(const std::string &source, const std::string &fileName) {
  linkNnscOps();
  Program program;
  program.fileName_ = fileName;
  program.unit_ = std::make_shared<torch::jit::CompilationUnit>();
  program.evalForms_ = std::make_shared<EvalForms>();
  try {
    torch::jit::Parser parser(std::make_shared<torch::jit::Source>(source, fileName, 1));
    std::vector<torch::jit::Def> defs;
    std::vector<torch::jit::ResolverPtr> resolvers;
    auto resolver = std::make_shared<ProgramResolver>();
    while (parser.lexer().cur().kind != torch::jit::TK_EOF) {
      defs.emplace_back(parser.parseFunction(/*is_method=*/false));
      resolvers.push_back(resolver);
      program.functions_.push_back(defs.back().name().name());
    }
    program.unit_->define({}, {}, {}, defs, resolvers, nullptr);
  } catch (const std::exception &e) {
    return Status::error(compileError(e.what(), fileName));
  }
  if (program.functions_.empty())
    return errorf("{}: error: the program defines no function", fileName);
  if (program.functions_.size() == 1)
    program.entry_ = program.functions_[0];
  return program;
}

Expected<Program> Program::load(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return errorf("{}: error: cannot read the program", path);
  std::stringstream text;
  text << in.rdbuf();
  return compile(text.str(), path);
}

bool Program::hasFunction(const std::string &name) const {
  return std::find(functions_.begin(), functions_.end(), name) != functions_.end();
}

Status Program::missing(const std::string &function) const {
  return errorf("{}: error: no function '{}' in the program (defined: {})", fileName_, function,
                fmt::join(functions_, ", "));
}

Expected<std::vector<std::string>> Program::argumentNames(const std::string &function) const {
  if (!hasFunction(function))
    return missing(function);
  std::vector<std::string> names;
  for (const c10::Argument &a : unit_->get_function(function).getSchema().arguments())
    names.push_back(a.name());
  return names;
}

Status Program::setEntry(const std::string &function) {
  if (!hasFunction(function))
    return missing(function);
  entry_ = function;
  return Status::ok();
}

Expected<std::vector<at::Tensor>> Program::run(std::vector<c10::IValue> args, Mode mode) const {
  if (entry_.empty())
    return errorf("{}: error: the program defines {} functions; choose the entry ({})", fileName_,
                  functions_.size(), fmt::join(functions_, ", "));
  return run(entry_, std::move(args), mode);
}

Expected<std::vector<at::Tensor>> Program::run(const std::string &function,
                                               std::vector<c10::IValue> args, Mode mode) const {
  if (!hasFunction(function))
    return missing(function);
  CurrentProgram scope(this, mode);
  try {
    torch::jit::Function &f =
        mode == Mode::Eval ? evalForm(function) : unit_->get_function(function);
    c10::IValue result = f(std::move(args));
    std::vector<at::Tensor> outputs;
    flatten(result, outputs);
    return outputs;
  } catch (const c10::Error &e) {
    return Status::internal(
        runtimeError(std::string("\n") + e.what_without_backtrace(), fileName_, function));
  } catch (const std::exception &e) {
    return Status::internal(runtimeError(e.what(), fileName_, function));
  }
}

} // namespace nnsc::rt
