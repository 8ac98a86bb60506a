#pragma once
/// The one boundary of every tool: its main is `return nnsc::runTool(name,
/// argc, argv, toolMain);` and toolMain parses with NNSC_PARSE. Whatever the
/// input, a tool then ends with exit code 0 (ok or --help), 1 (bad input,
/// a bad flag or value included, the message naming it) or 2 (an internal
/// error), and a message; never `terminate`:
///  - a CLI11 error (unknown flag, a value that does not convert or is out of
///    range) is bad input, 1 (CLI11's own codes run past 100);
///  - an exception that escapes the tool (LibTorch's c10::Error, yaml-cpp,
///    protobuf, nlohmann, std::bad_alloc, anything) is caught here: out of
///    memory is reported as such, everything else as an internal error, 2,
///    with the exception's first lines (no C++ backtrace).
/// Header-only: only tools include it (it pulls in CLI11).

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

namespace nnsc {

/// CLI11's exit for `e`, mapped to the tools' codes: help and version 0,
/// anything else 1 (CLI11 has printed the message).
inline int cliExit(CLI::App &app, const CLI::ParseError &e) {
  int code = app.exit(e);
  return code == 0 ? 0 : 1;
}

/// A check for an unsigned flag (a seed): CLI11 converts with strtoull, which
/// wraps "-1" to 2^64-1; this refuses anything but digits that fit 64 bits.
inline CLI::Validator unsignedInteger() {
  return CLI::Validator(
      [](std::string &text) -> std::string {
        bool digits = !text.empty() && text.size() <= 20 &&
                      text.find_first_not_of("0123456789") == std::string::npos;
        // 20 digits may still pass 2^64-1: compare as text of equal length.
        if (digits && text.size() == 20 && text > "18446744073709551615")
          digits = false;
        return digits ? std::string()
                      : "'" + text + "' is not a whole number from 0 to 18446744073709551615";
      },
      "UINT64");
}

/// The text of an escaped exception for a message: its first lines, without
/// the "Exception raised from" or "frame #" backtrace LibTorch appends.
inline std::string exceptionText(const std::exception &e) {
  std::string text = e.what();
  for (const char *cut : {"\nException raised from", "\nframe #"})
    if (auto at = text.find(cut); at != std::string::npos)
      text.resize(at);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

/// Runs `body(argc, argv)`, which returns the exit code, inside the boundary.
template <typename Body> int runTool(const char *tool, int argc, char **argv, Body body) {
  try {
    return body(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr,
                 "%s: error: out of memory (an input asks for more than this machine has)\n", tool);
    return 1;
  } catch (const std::exception &e) {
    std::string text = exceptionText(e);
    bool oom = text.find("can't allocate memory") != std::string::npos ||
               text.find("out of memory") != std::string::npos;
    std::fprintf(stderr, "%s: %s: %s\n", tool, oom ? "error: out of memory" : "internal error",
                 text.c_str());
    return oom ? 1 : 2;
  } catch (...) {
    std::fprintf(stderr, "%s: internal error: an unknown exception escaped\n", tool);
    return 2;
  }
}

} // namespace nnsc

/// CLI11_PARSE with the tools' exit codes (see cliExit).
#define NNSC_PARSE(app, argc, argv)                                                                \
  do {                                                                                             \
    try {                                                                                          \
      (app).parse((argc), (argv));                                                                 \
    } catch (const CLI::ParseError &e) {                                                           \
      return ::nnsc::cliExit((app), e);                                                            \
    }                                                                                              \
  } while (false)
