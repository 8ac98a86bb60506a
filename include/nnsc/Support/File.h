#pragma once
/// Whole-file reads and crash-safe writes.

#include <functional>
#include <string>
#include <string_view>

#include "nnsc/Support/Status.h"

namespace nnsc {

/// Reads the file at `path`; the error names the path and the OS reason.
Expected<std::string> readFile(const std::string &path);

/// Writes `bytes` to `path` atomically: a temporary name in the same
/// directory, flushed with fsync, then renamed over `path`. A crash leaves
/// either the old file or the new one, never half of one.
Status writeFileAtomic(const std::string &path, std::string_view bytes);

/// Like writeFileAtomic, but the content comes from `writer`, which appends
/// pieces through the callback it is given (for files too big to assemble).
Status writeFileAtomicStreamed(
    const std::string &path,
    const std::function<Status(const std::function<Status(std::string_view)> &)> &writer);

/// Creates `dir` and its parents if missing.
Status makeDirs(const std::string &dir);

} // namespace nnsc
