#pragma once
// Strings written into the measured files' YAML (names, ids, descriptions,
// command lines), so that any text reads back as itself: a quote, a
// backslash or a newline in a --name must not end the scalar or add keys.

#include <cctype>
#include <string>

#include <fmt/format.h>

namespace nnsc::profile {

/// `s` as a YAML double-quoted scalar: `"` and `\` escaped, control
/// characters as \n, \t, \r or \xNN; other bytes (UTF-8) as they are.
inline std::string yamlQuoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\')
      out += {'\\', c};
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out + "\"";
}

/// `s` plain where it reads back as the same string (a word of letters,
/// digits, '.', '_' and '-' starting with a letter, not a YAML 1.1 boolean
/// or null), else quoted: "cpu-local" stays cpu-local.
inline std::string yamlScalar(const std::string &s) {
  static const char *const special[] = {"null", "true", "false", "yes", "no",
                                        "on",   "off",  "y",     "n"};
  bool plain = !s.empty() && std::isalpha(static_cast<unsigned char>(s[0]));
  for (char c : s)
    plain =
        plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  std::string lower;
  for (char c : s)
    lower += char(std::tolower(static_cast<unsigned char>(c)));
  for (const char *word : special)
    plain = plain && lower != word;
  return plain ? s : yamlQuoted(s);
}

} // namespace nnsc::profile
