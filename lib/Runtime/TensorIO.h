#pragma once
// Safetensors entries <-> LibTorch tensors (private to the runtime).

#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "nnsc/Support/Safetensors.h"

namespace nnsc::rt {

/// The scalar type of a safetensors dtype code ("F32"); nullopt if unknown.
std::optional<at::ScalarType> scalarTypeOfCode(std::string_view code);

/// The safetensors code of a scalar type; empty if it has none.
std::string codeOfScalarType(at::ScalarType type);

/// A CPU tensor holding a copy of `entry`'s bytes; errors name `file`.
Expected<at::Tensor> tensorFromEntry(const SafetensorsEntry &entry, const std::string &file);

/// An entry borrowing `t`'s bytes: `t` must be a contiguous CPU tensor that
/// outlives the write.
SafetensorsEntry entryOfTensor(const std::string &name, const at::Tensor &t);

} // namespace nnsc::rt
