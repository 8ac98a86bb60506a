#pragma once
#include <cstdint>
/// Shared checks for YAML input files (the cost model's, plan files,
/// autodist constraints): located errors, known keys, positive numbers.
/// yaml-cpp exceptions stop here.

#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"

namespace nnsc::cost {

class YamlReader {
public:
  YamlReader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {}

  /// Parses the text; the root must be a map.
  Expected<YAML::Node> root() const;
  /// Parses the text, whatever its root (a syntax error at its position).
  Expected<YAML::Node> parse() const;
  /// The position of `n` in the file (1-based).
  SourcePos posOf(const YAML::Node &n) const {
    return {path_, n.Mark().line + 1, n.Mark().column + 1};
  }

  const std::string &path() const { return path_; }
  Status errorAt(const YAML::Node &n, const std::string &msg) const;
  /// An error at the file's start (no node to point at).
  Status errorAtTop(const std::string &msg) const;

  /// Every key of `map` is in `allowed` and appears once.
  Status checkKeys(const YAML::Node &map, const std::set<std::string> &allowed,
                   const std::string &what) const;
  /// `map[key]` exists (else "missing key 'key' in what").
  Expected<YAML::Node> require(const YAML::Node &map, const std::string &key,
                               const std::string &what) const;
  /// A number >= 0 (> 0 when `positive`); the message names `key`.
  Expected<double> number(const YAML::Node &n, const std::string &key, bool positive) const;
  /// An integer from `min` to `max`, checked before any narrowing.
  Expected<int64_t> integer(const YAML::Node &n, const std::string &key, int64_t min,
                            int64_t max = INT32_MAX) const;
  /// A plain string.
  Expected<std::string> string(const YAML::Node &n, const std::string &key) const;

private:
  std::string path_;
  std::string text_;
};

/// "a, b, c" for messages.
std::string joinKeys(const std::set<std::string> &keys);

} // namespace nnsc::cost
