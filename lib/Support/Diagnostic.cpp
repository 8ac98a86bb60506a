#include "nnsc/Support/Diagnostic.h"

#include <fmt/format.h>

namespace nnsc {

std::string formatError(const SourcePos &pos, std::string_view message) {
  std::string out = pos.file;
  if (!out.empty() && pos.line > 0) {
    out += fmt::format(":{}", pos.line);
    if (pos.col > 0)
      out += fmt::format(":{}", pos.col);
  }
  if (!out.empty())
    out += ": ";
  out += "error: ";
  out += message;
  return out;
}

std::string_view lineOf(std::string_view text, int line) {
  if (line <= 0)
    return {};
  size_t begin = 0;
  for (int l = 1; l < line; ++l) {
    begin = text.find('\n', begin);
    if (begin == std::string_view::npos)
      return {};
    ++begin;
  }
  size_t end = text.find('\n', begin);
  return text.substr(begin, end == std::string_view::npos ? text.npos : end - begin);
}

std::string formatErrorWithSnippet(const SourcePos &pos, std::string_view message,
                                   std::string_view text) {
  std::string out = formatError(pos, message);
  std::string_view snippet = lineOf(text, pos.line);
  if (snippet.empty())
    return out;
  out += fmt::format("\n  {}", snippet);
  if (pos.col > 0)
    out += fmt::format("\n  {}^", std::string(pos.col - 1, ' '));
  return out;
}

} // namespace nnsc
