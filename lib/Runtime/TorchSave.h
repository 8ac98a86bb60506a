// Writes a state dict the way `torch.save(model.state_dict(), path)` does, so
// that every PyTorch loads it with `torch.load(path, weights_only=True)`.
#pragma once

#include <map>
#include <string>

#include <ATen/ATen.h>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// Serializes `tensors` (name -> tensor; entries that are the same tensor, such
/// as tied weights, share one storage) into torch.save's zip format: an
/// OrderedDict of plain tensors whose pickle names only the globals
/// weights_only unpicklers accept (collections.OrderedDict,
/// torch._utils._rebuild_tensor_v2, torch.<Dtype>Storage). Tensors go to the CPU.
/// Returns the archive's bytes, or an error naming an unsupported dtype.
Expected<std::string> torchSaveBytes(const std::map<std::string, at::Tensor> &tensors);

/// Reads a torch.save archive holding a dict (or OrderedDict) of tensors, as
/// torchSaveBytes and Python's torch.save(model.state_dict()) write it:
/// name -> tensor (CPU; tied names share storage). Entries that are not
/// tensors are skipped; attributes (a state_dict's _metadata) are ignored.
/// Errors name `path` and what the reader did not understand.
Expected<std::map<std::string, at::Tensor>> torchLoadTensors(const std::string &path);

} // namespace nnsc::rt
