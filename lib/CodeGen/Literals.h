#pragma once
// Python/TorchScript spellings of IR values (private to nnsc_codegen).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "nnsc/IR/Graph.h"

namespace nnsc::codegen {

/// A float literal that reads back to the same double: "0.2", "1e-05",
/// "2.0", "float('inf')", "float('-inf')", "float('nan')".
std::string pyFloat(double v);
/// An int literal; INT64_MIN is written as an expression.
std::string pyInt(int64_t v);
/// A double-quoted string literal with escapes.
std::string pyString(std::string_view s);
/// c10::ScalarType's integer for `t` (float32 → 6, int64 → 4, ...): TorchScript
/// passes dtypes as ints.
int scalarTypeCode(ir::DType t);
/// True for Python's reserved words (`from`, `lambda`, `None`, ...).
bool isPythonKeyword(std::string_view s);
/// `name` made a Python identifier that is not a keyword.
std::string pyIdentifier(std::string_view name);
/// The value of a 0-dim constant with recorded data as a literal ("0.125",
/// "3", "True"); nullopt for complex types or missing data.
std::optional<std::string> constantScalarLiteral(const ir::Tensor &t);

} // namespace nnsc::codegen
