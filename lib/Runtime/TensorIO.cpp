#include "TensorIO.h"

#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace nnsc::rt {

namespace {

struct CodeType {
  const char *code;
  at::ScalarType type;
};

constexpr CodeType kCodes[] = {
    {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16}, {"F64", at::kDouble},
    {"I64", at::kLong},  {"I32", at::kInt},   {"I16", at::kShort},     {"I8", at::kChar},
    {"U8", at::kByte},   {"BOOL", at::kBool},
};

} // namespace

std::optional<at::ScalarType> scalarTypeOfCode(std::string_view code) {
  for (const auto &c : kCodes)
    if (code == c.code)
      return c.type;
  return std::nullopt;
}

std::string codeOfScalarType(at::ScalarType type) {
  for (const auto &c : kCodes)
    if (type == c.type)
      return c.code;
  return "";
}

Expected<at::Tensor> tensorFromEntry(const SafetensorsEntry &entry, const std::string &file) {
  auto type = scalarTypeOfCode(entry.dtype);
  if (!type)
    return errorf("{}: error: tensor '{}' has unsupported dtype '{}'", file, entry.name,
                  entry.dtype);
  at::Tensor t = at::empty(entry.shape, at::TensorOptions().dtype(*type));
  if (static_cast<size_t>(t.nbytes()) != entry.bytes.size())
    return errorf("{}: error: tensor '{}' holds {} bytes; its shape needs {}", file, entry.name,
                  entry.bytes.size(), t.nbytes());
  if (!entry.bytes.empty())
    std::memcpy(t.data_ptr(), entry.bytes.data(), entry.bytes.size());
  return t;
}

SafetensorsEntry entryOfTensor(const std::string &name, const at::Tensor &t) {
  return {name, codeOfScalarType(t.scalar_type()), t.sizes().vec(),
          std::string_view(static_cast<const char *>(t.data_ptr()), t.nbytes())};
}

} // namespace nnsc::rt
