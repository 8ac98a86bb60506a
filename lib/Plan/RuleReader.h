#pragma once
// Reading YAML files of rules over graph nodes (private to nnsc_plan): the
// values and selectors that plan files (PlanFile.h) and autodist's
// constraints (Constraints.h) share, each error at file:line:col; the
// located errors and key checks are cost::YamlReader's.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "nnsc/Cost/YamlReader.h"
#include "nnsc/Plan/PlanFile.h"

namespace nnsc::plan {

class RuleReader : protected cost::YamlReader {
public:
  using cost::YamlReader::YamlReader;

protected:
  Expected<int64_t> readInt(const YAML::Node &n, const char *what, int64_t min,
                            int64_t max = INT32_MAX) const;
  /// A string or a list of strings.
  Status readStrings(const YAML::Node &n, std::vector<std::string> &out, const char *what) const;
  /// The selectors of a rule map (module, op, node, class, nth): at least
  /// one of module, op, node, class.
  Status readSelectors(const YAML::Node &n, PlanRule &rule) const;
};

} // namespace nnsc::plan
