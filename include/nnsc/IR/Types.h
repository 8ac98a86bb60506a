#pragma once
/// Element types and shapes of IR tensors.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nnsc::ir {

enum class DType {
  Unspecified,
  Float32,
  Float16,
  BFloat16,
  Float64,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
  Complex64,
  Complex128
};

using Shape = std::vector<int64_t>;

/// "float32", "int64", ... as used in text dumps and input specs.
std::string_view dtypeName(DType t);
/// Parses dtypeName's spelling (also "float", "long", "int", "half", "bf16").
std::optional<DType> parseDType(std::string_view name);
/// "F32", "I64", ... the safetensors code.
std::string_view dtypeSafetensorsCode(DType t);
std::optional<DType> dtypeFromSafetensorsCode(std::string_view code);
/// Bytes per element.
int64_t dtypeSize(DType t);
bool isFloatingPoint(DType t);

int64_t numel(const Shape &shape);
/// "[8, 256, 384]"
std::string shapeString(const Shape &shape);

} // namespace nnsc::ir
