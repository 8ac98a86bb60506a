// Module hierarchy and source locations of inlined TorchScript nodes, and the
// dtype mapping between LibTorch and the IR.
#include "GraphExecutor.h"

#include <map>
#include <regex>

#include <torch/csrc/jit/ir/scope.h>

namespace nnsc::trace {

namespace {

std::string shortClassName(const c10::ClassTypePtr &cls) {
  if (!cls || !cls->name())
    return "";
  return cls->name()->name();
}

} // namespace

ModuleIndex buildModuleIndex(const torch::jit::Module &module) {
  ModuleIndex index;
  std::map<std::string, int> typeUses;
  for (const auto &m : module.named_modules()) {
    std::string type = m.value.type()->name() ? m.value.type()->name()->qualifiedName() : "";
    index.pathOfType[type] = m.name;
    ++typeUses[type];
  }
  // A class type shared by several instances (scripted modules) names no
  // single path; those fall back to the call stack's instance names.
  for (const auto &[type, uses] : typeUses)
    if (uses > 1)
      index.pathOfType.erase(type);
  return index;
}

namespace {

bool isLibraryFile(const std::string &file) {
  return file.empty() || file.find("/torch/") != std::string::npos ||
         file.rfind("code/__torch__", 0) == 0 || file.find('<') != std::string::npos;
}

// Traced archives keep each op's Python stack as its original source text,
// one frame a line: "/path/model.py(76): forward". Finds the first frame in
// the user's files.
bool userFrameFromStack(const std::string &text, ir::SourceLoc &loc) {
  static const std::regex frame(R"(^(.+)\((\d+)\): [A-Za-z_<>][\w<>]*$)");
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    std::smatch m;
    if (!std::regex_match(line, m, frame) || isLibraryFile(m[1].str()))
      continue;
    loc.file = m[1].str();
    loc.line = std::stoi(m[2].str());
    loc.col = 0;
    return true;
  }
  return false;
}

// The location of `range` if it lies in the user's own code. Ranges of a
// loaded archive point into its serialized code; the range that generated
// that code holds the original file and line.
bool userLocation(const torch::jit::SourceRange &range, ir::SourceLoc &loc) {
  if (!range.source())
    return false;
  torch::jit::SourceRange orig = range.findSourceRangeThatGenerated().value_or(range);
  if (auto flc = orig.file_line_col(); flc && !isLibraryFile(std::get<0>(*flc))) {
    loc.file = std::get<0>(*flc);
    loc.line = static_cast<int>(std::get<1>(*flc));
    loc.col = static_cast<int>(std::get<2>(*flc)) + 1;
    return true;
  }
  return orig.source() && userFrameFromStack(orig.source()->text_str().str(), loc);
}

void describeModule(const torch::jit::Node *node, const ModuleIndex &index, ir::Node &out) {
  auto cs = node->callstack();
  if (!cs)
    return;
  std::string joined;
  for (const auto &entry : (*cs)->vec()) {
    const auto &info = std::get<torch::jit::kModuleInstanceInfo>(entry);
    if (!info || !info->class_type())
      continue;
    auto cls = info->class_type();
    out.moduleClass = shortClassName(cls);
    std::string qualified = cls->name() ? cls->name()->qualifiedName() : "";
    joined += (joined.empty() ? "" : ".") + info->instance_name();
    auto it = index.pathOfType.find(qualified);
    out.modulePath = it != index.pathOfType.end() ? it->second : joined;
    out.moduleStack.push_back({out.modulePath, out.moduleClass});
  }
}

} // namespace

// The node's own source range points into torch's code when the op was called
// from a library function (F.linear); then the innermost call site in the
// user's files is the useful location.
void describeNode(const torch::jit::Node *node, const ModuleIndex &index, ir::Node &out) {
  describeModule(node, index, out);
  if (userLocation(node->sourceRange(), out.loc))
    return;
  if (auto cs = node->callstack()) {
    auto frames = (*cs)->vec();
    for (auto it = frames.rbegin(); it != frames.rend(); ++it)
      if (userLocation(std::get<1>(*it), out.loc))
        return;
  }
}

ir::DType fromScalarType(c10::ScalarType t) {
  switch (t) {
  case c10::kFloat:
    return ir::DType::Float32;
  case c10::kHalf:
    return ir::DType::Float16;
  case c10::kBFloat16:
    return ir::DType::BFloat16;
  case c10::kDouble:
    return ir::DType::Float64;
  case c10::kLong:
    return ir::DType::Int64;
  case c10::kInt:
    return ir::DType::Int32;
  case c10::kShort:
    return ir::DType::Int16;
  case c10::kChar:
    return ir::DType::Int8;
  case c10::kByte:
    return ir::DType::UInt8;
  case c10::kBool:
    return ir::DType::Bool;
  case c10::kComplexFloat:
    return ir::DType::Complex64;
  case c10::kComplexDouble:
    return ir::DType::Complex128;
  default:
    return ir::DType::Unspecified;
  }
}

c10::ScalarType toScalarType(ir::DType t) {
  for (auto s :
       {c10::kFloat, c10::kHalf, c10::kBFloat16, c10::kDouble, c10::kLong, c10::kInt, c10::kShort,
        c10::kChar, c10::kByte, c10::kBool, c10::kComplexFloat, c10::kComplexDouble})
    if (fromScalarType(s) == t)
      return s;
  return c10::kFloat;
}

} // namespace nnsc::trace
