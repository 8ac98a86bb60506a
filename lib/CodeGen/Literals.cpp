#include "Literals.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace nnsc::codegen {

std::string pyFloat(double v) {
  if (std::isnan(v))
    return "float('nan')";
  if (std::isinf(v))
    return v > 0 ? "float('inf')" : "float('-inf')";
  std::string s = fmt::format("{}", v); // shortest form that round-trips
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

std::string pyInt(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min())
    return "-9223372036854775807 - 1";
  return std::to_string(v);
}

std::string pyString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

int scalarTypeCode(ir::DType t) {
  switch (t) {
  case ir::DType::UInt8:
    return 0;
  case ir::DType::Int8:
    return 1;
  case ir::DType::Int16:
    return 2;
  case ir::DType::Int32:
    return 3;
  case ir::DType::Int64:
    return 4;
  case ir::DType::Float16:
    return 5;
  case ir::DType::Float32:
    return 6;
  case ir::DType::Float64:
    return 7;
  case ir::DType::Complex64:
    return 9;
  case ir::DType::Complex128:
    return 10;
  case ir::DType::Bool:
    return 11;
  case ir::DType::BFloat16:
    return 15;
  case ir::DType::Unspecified:
    break;
  }
  return -1;
}

bool isPythonKeyword(std::string_view s) {
  static const std::set<std::string_view> kw = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return kw.count(s) > 0;
}

std::string pyIdentifier(std::string_view name) {
  std::string id;
  for (char c : name)
    id += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0])))
    id = "_" + id;
  if (isPythonKeyword(id))
    id += "_";
  return id;
}

namespace {

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  if (exp == 0) // zero or subnormal: mant * 2^-24
    return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mant), -24);
  uint32_t bits =
      exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <typename T> T load(const std::string &data) {
  T v;
  std::memcpy(&v, data.data(), sizeof(T));
  return v;
}

} // namespace

std::optional<std::string> constantScalarLiteral(const ir::Tensor &t) {
  if (!t.shape.empty() || static_cast<int64_t>(t.data.size()) != ir::dtypeSize(t.dtype))
    return std::nullopt;
  switch (t.dtype) {
  case ir::DType::Float32:
    return pyFloat(load<float>(t.data));
  case ir::DType::Float64:
    return pyFloat(load<double>(t.data));
  case ir::DType::Float16:
    return pyFloat(halfToFloat(load<uint16_t>(t.data)));
  case ir::DType::BFloat16:
    return pyFloat(bf16ToFloat(load<uint16_t>(t.data)));
  case ir::DType::Int64:
    return pyInt(load<int64_t>(t.data));
  case ir::DType::Int32:
    return pyInt(load<int32_t>(t.data));
  case ir::DType::Int16:
    return pyInt(load<int16_t>(t.data));
  case ir::DType::Int8:
    return pyInt(load<int8_t>(t.data));
  case ir::DType::UInt8:
    return pyInt(load<uint8_t>(t.data));
  case ir::DType::Bool:
    return load<uint8_t>(t.data) ? "True" : "False";
  default:
    return std::nullopt;
  }
}

} // namespace nnsc::codegen
