// Module hierarchy and source locations of inlined TorchScript nodes, and the
// dtype mapping between LibTorch and the IR.
#include "GraphExecutor.h"

#include <map>

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

// Traced archives keep the Python stack of each op as its source text, one
// frame per line: "/path/model.py(76): forward". The first frame outside
// torch's own files is the user's line.
bool userFrameFromStack(std::string_view text, ir::SourceLoc &loc) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end == text.npos ? text.npos : end - pos);
    pos = end == text.npos ? text.size() : end + 1;
    size_t open = line.rfind('('), close = line.rfind("):");
    if (open == line.npos || close == line.npos || close < open)
      continue;
    std::string_view file = line.substr(0, open);
    if (file.find("/torch/") != file.npos || file.find("<") != file.npos)
      continue;
    loc.file = std::string(file);
    loc.line = std::atoi(std::string(line.substr(open + 1, close - open - 1)).c_str());
    loc.col = 0;
    return true;
  }
  return false;
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
  }
}

} // namespace

void describeNode(const torch::jit::Node *node, const ModuleIndex &index, ir::Node &out) {
  describeModule(node, index, out);
  const torch::jit::SourceRange &range = node->sourceRange();
  if (!range.source())
    return;
  if (userFrameFromStack(range.text().str(), out.loc))
    return;
  if (auto flc = range.file_line_col()) {
    out.loc.file = std::get<0>(*flc);
    out.loc.line = static_cast<int>(std::get<1>(*flc));
    out.loc.col = static_cast<int>(std::get<2>(*flc)) + 1;
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
  for (auto s : {c10::kFloat, c10::kHalf, c10::kBFloat16, c10::kDouble, c10::kLong, c10::kInt,
                 c10::kShort, c10::kChar, c10::kByte, c10::kBool, c10::kComplexFloat,
                 c10::kComplexDouble})
    if (fromScalarType(s) == t)
      return s;
  return c10::kFloat;
}

} // namespace nnsc::trace
