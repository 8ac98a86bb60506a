#include "nnsc/IR/Types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::ir {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  std::string_view code;
  int64_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::Float32, "float32", "F32", 4},     {DType::Float16, "float16", "F16", 2},
    {DType::BFloat16, "bfloat16", "BF16", 2},  {DType::Float64, "float64", "F64", 8},
    {DType::Int64, "int64", "I64", 8},         {DType::Int32, "int32", "I32", 4},
    {DType::Int16, "int16", "I16", 2},         {DType::Int8, "int8", "I8", 1},
    {DType::UInt8, "uint8", "U8", 1},          {DType::Bool, "bool", "BOOL", 1},
    {DType::Complex64, "complex64", "C64", 8}, {DType::Complex128, "complex128", "C128", 16},
};
const DTypeInfo *info(DType t) {
  for (const auto &i : kDTypes)
    if (i.type == t)
      return &i;
  return nullptr;
}
} // namespace

std::string_view dtypeName(DType t) {
  const auto *i = info(t);
  return i ? i->name : "unspecified";
}

std::optional<DType> parseDType(std::string_view name) {
  for (const auto &i : kDTypes)
    if (i.name == name)
      return i.type;
  if (name == "float")
    return DType::Float32;
  if (name == "double")
    return DType::Float64;
  if (name == "half" || name == "fp16")
    return DType::Float16;
  if (name == "bf16")
    return DType::BFloat16;
  if (name == "long")
    return DType::Int64;
  if (name == "int")
    return DType::Int32;
  return std::nullopt;
}

std::string_view dtypeSafetensorsCode(DType t) {
  const auto *i = info(t);
  return i ? i->code : "";
}

std::optional<DType> dtypeFromSafetensorsCode(std::string_view code) {
  for (const auto &i : kDTypes)
    if (i.code == code)
      return i.type;
  return std::nullopt;
}

int64_t dtypeSize(DType t) {
  const auto *i = info(t);
  return i ? i->size : 0;
}

bool isFloatingPoint(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64;
}

int64_t numel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const Shape &shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

} // namespace nnsc::ir
