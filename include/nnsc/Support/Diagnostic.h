#pragma once
/// Formatting of located error messages, LLVM style:
///   file:line:col: error: message
///     offending line
///         ^

#include <string>
#include <string_view>

namespace nnsc {

/// A position in a text file; line and col are 1-based, 0 means unknown.
struct SourcePos {
  std::string file;
  int line = 0;
  int col = 0;
};

/// "file:line:col: error: message" (omits the parts that are unknown).
std::string formatError(const SourcePos &pos, std::string_view message);

/// formatError plus the offending line of `text` and a caret under `col`.
std::string formatErrorWithSnippet(const SourcePos &pos, std::string_view message,
                                   std::string_view text);

/// The 1-based `line` of `text`, without its newline; empty if out of range.
std::string_view lineOf(std::string_view text, int line);

} // namespace nnsc
