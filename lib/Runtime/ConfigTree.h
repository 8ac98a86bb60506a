#pragma once
// A YAML config flattened into dotted key paths ("train.steps"), with
// command-line overrides and ${...} interpolation applied. Private to the
// trainer config; no LibTorch.

#include <map>
#include <string>
#include <vector>

#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

/// One leaf value: a scalar (one item) or a list of scalars.
struct ConfigValue {
  std::vector<std::string> items;
  bool isList = false;
  SourcePos pos;      ///< file:line:col, or {"command line"} for overrides
  std::string origin; ///< the override option text, empty for the file
};

using FlatConfig = std::map<std::string, ConfigValue>;

/// Formats an error located at `v` (with the source line when `text` is the
/// config file's text and `v` came from it).
std::string errorAtValue(const ConfigValue &v, const std::string &message, const std::string &text);

/// Flattens YAML `text` (top level a map; nested maps become "a.b").
Expected<FlatConfig> flattenYaml(const std::string &text, const std::string &path);

/// Parses one value written as YAML text ("3", "[0.9, 0.95]", "a/b").
ConfigValue valueFromText(const std::string &yamlText);

/// Applies one "--a.b=value" override; the value is parsed as YAML (so
/// "[0.9, 0.95]" is a list).
Status applyOverride(FlatConfig &config, const std::string &arg);

/// Replaces every "${key}" and "${env:VAR}" in the values, recursively; a
/// whole-value reference to a list copies the list. Cycles are errors.
Status interpolate(FlatConfig &config, const EnvLookup &env, const std::string &text);

} // namespace nnsc::rt
