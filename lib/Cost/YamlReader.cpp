#include "nnsc/Cost/YamlReader.h"

#include <cmath>

#include <fmt/format.h>

namespace nnsc::cost {

std::string joinKeys(const std::set<std::string> &keys) {
  std::string out;
  for (const std::string &k : keys)
    out += (out.empty() ? "" : ", ") + k;
  return out;
}

Expected<YAML::Node> YamlReader::parse() const {
  try {
    return YAML::Load(text_);
  } catch (const YAML::Exception &e) {
    SourcePos pos{path_, e.mark.line + 1, e.mark.column + 1};
    return Status::error(formatErrorWithSnippet(pos, e.msg, text_));
  }
}

Expected<YAML::Node> YamlReader::root() const {
  auto root = parse();
  if (root && !root->IsMap())
    return errorAtTop("expected a map at the top of the file");
  return root;
}

Status YamlReader::errorAt(const YAML::Node &n, const std::string &msg) const {
  return Status::error(formatErrorWithSnippet(posOf(n), msg, text_));
}

Status YamlReader::errorAtTop(const std::string &msg) const {
  return Status::error(formatError({path_, 1, 1}, msg));
}

Status YamlReader::checkKeys(const YAML::Node &map, const std::set<std::string> &allowed,
                             const std::string &what) const {
  if (!map.IsMap())
    return errorAt(map, fmt::format("expected a map for {}", what));
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = it->first.Scalar();
    if (!allowed.count(key))
      return errorAt(it->first, fmt::format("unknown key '{}' in {}; expected one of: {}", key,
                                            what, joinKeys(allowed)));
    if (!seen.insert(key).second)
      return errorAt(it->first, fmt::format("duplicate key '{}' in {}", key, what));
  }
  return Status::ok();
}

Expected<YAML::Node> YamlReader::require(const YAML::Node &map, const std::string &key,
                                         const std::string &what) const {
  YAML::Node n = map[key];
  if (!n || n.IsNull())
    return errorAt(map, fmt::format("missing key '{}' in {}", key, what));
  return n;
}

Expected<double> YamlReader::number(const YAML::Node &n, const std::string &key,
                                    bool positive) const {
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
    return errorAt(n, fmt::format("'{}' must be a number, got '{}'", key,
                                  n.IsScalar() ? n.Scalar() : std::string("a non-scalar")));
  if (v < 0 || (positive && v == 0))
    return errorAt(n, fmt::format("'{}' must be {}, got {}", key,
                                  positive ? "positive" : "non-negative", n.Scalar()));
  return v;
}

Expected<int64_t> YamlReader::integer(const YAML::Node &n, const std::string &key,
                                      int64_t min, int64_t max) const {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    return errorAt(n, fmt::format("'{}' must be an integer, got '{}'", key,
                                  n.IsScalar() ? n.Scalar() : std::string("a non-scalar")));
  if (v < min)
    return errorAt(n, fmt::format("'{}' must be at least {}, got {}", key, min, v));
  if (v > max) // before any narrowing to int: 4294967298 must not become 2
    return errorAt(n, fmt::format("'{}' must be at most {}, got {}", key, max, n.Scalar()));
  return v;
}

Expected<std::string> YamlReader::string(const YAML::Node &n, const std::string &key) const {
  if (!n.IsScalar())
    return errorAt(n, fmt::format("'{}' must be a string", key));
  return n.Scalar();
}

} // namespace nnsc::cost
