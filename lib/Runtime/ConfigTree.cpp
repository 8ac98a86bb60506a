#include "ConfigTree.h"

#include <set>

#include <yaml-cpp/yaml.h>

namespace nnsc::rt {

namespace {

SourcePos posOf(const std::string &path, const YAML::Node &n) {
  return {path, n.Mark().line + 1, n.Mark().column + 1};
}

std::string scalarText(const YAML::Node &n) { return n.IsNull() ? std::string() : n.Scalar(); }

// The config's keys nest three deep at most; a map deeper than this is a YAML alias that
// contains itself (`a: &a {b: *a}`), which would recurse without end.
constexpr int kMaxConfigDepth = 16;

// A value's text after ${...} references, at most: a path or a name is far shorter, and
// references that repeat one another grow tenfold a level (`a: ${b}${b}...`).
constexpr size_t kMaxValueBytes = 64 * 1024;

Status flattenInto(const YAML::Node &map, const std::string &prefix, const std::string &path,
                   const std::string &text, FlatConfig &out, int depth = 0) {
  if (depth > kMaxConfigDepth)
    return Status::error(formatErrorWithSnippet(
        posOf(path, map),
        fmt::format("maps nested more than {} deep under '{}' (an alias that contains itself?)",
                    kMaxConfigDepth, prefix.substr(0, prefix.size() - 1)),
        text));
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // Copies: it-> returns a proxy whose pair dies at the end of this statement.
    const YAML::Node key = it->first, val = it->second;
    if (!key.IsScalar())
      return Status::error(
          formatErrorWithSnippet(posOf(path, key), "keys must be plain names", text));
    std::string name = prefix + key.Scalar();
    if (!seen.insert(key.Scalar()).second) // yaml-cpp would keep one silently
      return Status::error(formatErrorWithSnippet(
          posOf(path, key), fmt::format("duplicate key '{}'{}", key.Scalar(),
                      prefix.empty() ? "" : " in '" + prefix.substr(0, prefix.size() - 1) + "'"),
          text));
    if (val.IsMap()) {
      NNSC_RETURN_IF_ERROR(flattenInto(val, name + ".", path, text, out, depth + 1));
      continue;
    }
    // The same key twice, once dotted (`optimizer.lr: 0.5`) and once in its section.
    if (auto earlier = out.find(name); earlier != out.end())
      return Status::error(formatErrorWithSnippet(
          posOf(path, key),
          fmt::format("'{}' is given twice: here and at line {}", name, earlier->second.pos.line),
          text));
    ConfigValue v;
    v.pos = posOf(path, key);
    if (val.IsSequence()) {
      v.isList = true;
      for (const auto &item : val) {
        if (!item.IsScalar())
          return Status::error(formatErrorWithSnippet(
              posOf(path, item), fmt::format("'{}' must be a list of plain values", name), text));
        v.items.push_back(item.Scalar());
      }
    } else {
      v.items.push_back(scalarText(val));
    }
    out[name] = std::move(v);
  }
  return Status::ok();
}

// Resolves the ${...} references of one key with cycle detection.
class Interpolator {
public:
  Interpolator(FlatConfig &config, const EnvLookup &env, const std::string &text)
      : config_(config), env_(env), text_(text) {}

  Status resolve(const std::string &key) {
    if (done_.count(key))
      return Status::ok();
    if (!active_.insert(key).second)
      return Status::error(errorAtValue(
          config_[key], fmt::format("'{}' refers to itself through ${{...}}", key), text_));
    ConfigValue &v = config_[key];
    std::vector<std::string> items;
    bool isList = v.isList;
    for (const auto &item : v.items) {
      auto whole = wholeReference(item);
      if (whole && !v.isList && config_.count(*whole) && config_[*whole].isList) {
        NNSC_RETURN_IF_ERROR(resolve(*whole));
        items = config_[*whole].items;
        isList = true;
        break;
      }
      auto r = substitute(key, item);
      if (!r)
        return r.status();
      items.push_back(r.take());
    }
    v.items = std::move(items);
    v.isList = isList;
    active_.erase(key);
    done_.insert(key);
    return Status::ok();
  }

private:
  static std::optional<std::string> wholeReference(const std::string &s) {
    if (s.size() > 3 && s.compare(0, 2, "${") == 0 && s.back() == '}' &&
        s.find("${", 2) == std::string::npos && s.compare(2, 4, "env:") != 0)
      return s.substr(2, s.size() - 3);
    return std::nullopt;
  }

  Expected<std::string> lookup(const std::string &key, const std::string &ref) {
    const ConfigValue &self = config_[key];
    if (ref.compare(0, 4, "env:") == 0) {
      auto val = env_(ref.substr(4));
      if (!val)
        return Status::error(errorAtValue(
            self, fmt::format("environment variable '{}' is not set", ref.substr(4)), text_));
      return *val;
    }
    if (!config_.count(ref))
      return Status::error(
          errorAtValue(self, fmt::format("'${{{}}}' names no config key", ref), text_));
    NNSC_RETURN_IF_ERROR(resolve(ref));
    const ConfigValue &target = config_[ref];
    if (target.isList)
      return Status::error(errorAtValue(
          self, fmt::format("'${{{}}}' is a list and cannot be part of a string", ref), text_));
    return target.items.empty() ? std::string() : target.items[0];
  }

  Expected<std::string> substitute(const std::string &key, const std::string &s) {
    std::string out;
    size_t at = 0;
    while (true) {
      size_t open = s.find("${", at);
      if (open == std::string::npos)
        break;
      size_t close = s.find('}', open);
      if (close == std::string::npos)
        return Status::error(
            errorAtValue(config_[key], fmt::format("unterminated '${{' in '{}'", s), text_));
      out += s.substr(at, open - at);
      auto val = lookup(key, s.substr(open + 2, close - open - 2));
      if (!val)
        return val.status();
      out += *val;
      if (out.size() > kMaxValueBytes)
        return Status::error(
            errorAtValue(config_[key],
                         fmt::format("'{}' grows beyond {} KiB through its ${{...}} references",
                                     key, kMaxValueBytes / 1024),
                         text_));
      at = close + 1;
    }
    return out + s.substr(at);
  }

  FlatConfig &config_;
  const EnvLookup &env_;
  const std::string &text_;
  std::set<std::string> active_, done_;
};

} // namespace

std::string errorAtValue(const ConfigValue &v, const std::string &message,
                         const std::string &text) {
  if (!v.origin.empty())
    return formatError({"command line"}, fmt::format("{} (in '{}')", message, v.origin));
  if (v.pos.line > 0)
    return formatErrorWithSnippet(v.pos, message, text);
  return formatError(v.pos, message);
}

Expected<FlatConfig> flattenYaml(const std::string &text, const std::string &path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception &ex) {
    return Status::error(
        formatErrorWithSnippet({path, ex.mark.line + 1, ex.mark.column + 1}, ex.msg, text));
  }
  FlatConfig out;
  if (root.IsNull())
    return out;
  if (!root.IsMap())
    return Status::error(formatError({path, 1, 1}, "the trainer config must be a map of keys"));
  try {
    NNSC_RETURN_IF_ERROR(flattenInto(root, "", path, text, out));
  } catch (const YAML::Exception &ex) {
    return Status::error(
        formatErrorWithSnippet({path, ex.mark.line + 1, ex.mark.column + 1}, ex.msg, text));
  }
  return out;
}

ConfigValue valueFromText(const std::string &value) {
  ConfigValue v;
  try {
    YAML::Node n = YAML::Load(value);
    if (n.IsSequence()) {
      v.isList = true;
      for (const auto &item : n)
        v.items.push_back(item.IsScalar() ? item.Scalar() : std::string());
      return v;
    }
    v.items.push_back(n.IsScalar() ? n.Scalar() : n.IsNull() ? std::string() : value);
  } catch (const YAML::Exception &) {
    v.items.push_back(value); // not YAML: take the text as it is
  }
  return v;
}

Status applyOverride(FlatConfig &config, const std::string &arg) {
  std::string body = arg.compare(0, 2, "--") == 0 ? arg.substr(2) : arg;
  size_t eq = body.find('=');
  if (eq == std::string::npos || eq == 0)
    return Status::error(formatError(
        {"command line"}, fmt::format("bad override '{}'; expected --key.path=value", arg)));
  ConfigValue v = valueFromText(body.substr(eq + 1));
  v.origin = arg;
  v.pos = {"command line"};
  config[body.substr(0, eq)] = std::move(v);
  return Status::ok();
}

Status interpolate(FlatConfig &config, const EnvLookup &env, const std::string &text) {
  Interpolator interp(config, env, text);
  std::vector<std::string> keys;
  for (const auto &kv : config)
    keys.push_back(kv.first);
  for (const auto &k : keys)
    NNSC_RETURN_IF_ERROR(interp.resolve(k));
  return Status::ok();
}

} // namespace nnsc::rt
