#pragma once
// Reading YAML files of rules over graph nodes (private to nnsc_plan): the
// checks and selectors that plan files (PlanFile.h) and autodist's
// constraints (Constraints.h) share, each error at file:line:col.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "nnsc/Plan/PlanFile.h"

namespace nnsc::plan {

class RuleReader {
public:
  RuleReader(std::string path, std::string text) : path_(std::move(path)), text_(std::move(text)) {}

protected:
  /// The document, or a YAML syntax error at its position.
  Expected<YAML::Node> load() const;
  SourcePos posOf(const YAML::Node &n) const {
    return {path_, n.Mark().line + 1, n.Mark().column + 1};
  }
  Status errorAt(const YAML::Node &n, const std::string &msg) const;
  Status errorAtStart(const std::string &msg) const;
  /// Every key of `map` is in `allowed`, none twice.
  Status checkKeys(const YAML::Node &map, const std::set<std::string> &allowed,
                   const char *what) const;
  Expected<int64_t> readInt(const YAML::Node &n, const char *what, int64_t min) const;
  /// A string or a list of strings.
  Status readStrings(const YAML::Node &n, std::vector<std::string> &out, const char *what) const;
  /// The selectors of a rule map (module, op, node, class, nth): at least
  /// one of module, op, node, class.
  Status readSelectors(const YAML::Node &n, PlanRule &rule) const;

  std::string path_;
  std::string text_;
};

} // namespace nnsc::plan
