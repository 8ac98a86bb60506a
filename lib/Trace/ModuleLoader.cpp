#include "ModuleLoader.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <dlfcn.h>
#include <fmt/format.h>

#include "GraphExecutor.h"
#include "nnsc/Support/Safetensors.h"

namespace nnsc::trace {

namespace {

// TorchScript archives are zip files: they start with "PK\x03\x04".
bool looksLikeZip(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0;
}

} // namespace

Expected<torch::jit::Module> loadModule(const std::string &path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return errorf("{}: error: no such file", path);
  if (std::filesystem::is_directory(path, ec))
    return errorf("{}: error: is a directory, expected a TorchScript archive (.pt)", path);
  if (!looksLikeZip(path))
    return errorf("{}: error: not a TorchScript archive (expected a zip file written by "
                  "torch.jit.save)",
                  path);
  try {
    // No map_location: archives built on the meta device keep meta tensors.
    return torch::jit::load(path);
  } catch (const c10::Error &e) {
    return errorf("{}: error: cannot load TorchScript archive (truncated or damaged?): {}", path,
                  firstLine(e.what_without_backtrace()));
  } catch (const std::exception &e) {
    return errorf("{}: error: cannot load TorchScript archive (truncated or damaged?): {}", path,
                  firstLine(e.what()));
  }
}

Status loadOpLibrary(const std::string &path) {
  if (!::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL))
    return errorf("{}: error: cannot load op library: {}", path, ::dlerror());
  return Status::ok();
}

Expected<at::Tensor> loadTensorFromSafetensors(const std::string &path, const std::string &name,
                                               const SourcePos &pos) {
  auto file = SafetensorsFile::open(path);
  if (!file)
    return Status::error(formatError(pos, file.status().message()));
  const SafetensorsEntry *e = (*file)->find(name);
  if (!e)
    return Status::error(formatError(pos, fmt::format("{} has no tensor named '{}'", path, name)));
  auto dtype = ir::dtypeFromSafetensorsCode(e->dtype);
  if (!dtype)
    return Status::error(formatError(pos, fmt::format("{}: unsupported dtype {}", path, e->dtype)));
  at::Tensor t = at::empty(e->shape, at::TensorOptions().dtype(toScalarType(*dtype)));
  std::memcpy(t.data_ptr(), e->bytes.data(), e->bytes.size());
  return t;
}

bool stateIsMeta(const torch::jit::Module &module) {
  for (const auto &p : module.named_parameters(true))
    if (p.value.is_meta())
      return true;
  for (const auto &b : module.named_buffers(true))
    if (b.value.is_meta())
      return true;
  return false;
}

} // namespace nnsc::trace
