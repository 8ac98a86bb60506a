#pragma once
/// The sample-input spec of nnsc-trace (format in docs/formats.md):
///
///   inputs:
///     - name: idx            # the forward argument's name
///       shape: [8, 256]
///       dtype: int64
///       range: [0, 65]       # optional: values drawn uniformly from [lo, hi)
///     - name: x
///       file: x.safetensors  # optional: take the tensor from a file (key = name)
///
/// Unknown keys, missing keys and ill-typed values are errors with file:line:col.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nnsc/IR/Types.h"
#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

struct InputSpecEntry {
  std::string name;
  ir::Shape shape;
  ir::DType dtype = ir::DType::Float32;
  std::optional<std::pair<double, double>> range;
  std::string file; ///< resolved relative to the spec's directory
  SourcePos pos;    ///< where the entry starts, for later error messages
};

struct InputSpec {
  std::string path;
  std::vector<InputSpecEntry> entries;
};

/// Reads and validates a spec file.
Expected<InputSpec> readInputSpec(const std::string &path);
/// As readInputSpec, from the file's `text`; `path` names it in errors and
/// locates relative `file:` entries. No LibTorch (library nnsc_tracespec).
Expected<InputSpec> parseInputSpec(const std::string &text, const std::string &path);

} // namespace nnsc::trace
