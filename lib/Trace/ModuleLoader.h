#pragma once
// Loading TorchScript archives, user op libraries and tensors from files,
// with LibTorch's exceptions turned into located errors.

#include <string>

#include <torch/script.h>

#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

/// Loads a TorchScript archive on the CPU; errors say whether the file is
/// missing, not a TorchScript archive, or damaged.
Expected<torch::jit::Module> loadModule(const std::string &path);

/// dlopen()s a shared library that registers custom ops (TORCH_LIBRARY).
Status loadOpLibrary(const std::string &path);

/// Reads tensor `name` from a safetensors file; `pos` locates the spec entry.
Expected<at::Tensor> loadTensorFromSafetensors(const std::string &path, const std::string &name,
                                               const SourcePos &pos);

/// True when any parameter or buffer of `module` lives on the meta device.
bool stateIsMeta(const torch::jit::Module &module);

} // namespace nnsc::trace
