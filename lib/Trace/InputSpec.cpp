#include "nnsc/Trace/InputSpec.h"

#include <filesystem>
#include <limits>
#include <set>

#include <yaml-cpp/yaml.h>

#include "nnsc/Support/File.h"

namespace nnsc::trace {

namespace {

SourcePos posOf(const std::string &path, const YAML::Node &n) {
  return {path, n.Mark().line + 1, n.Mark().column + 1};
}

Status errorAt(const std::string &path, const YAML::Node &n, const std::string &msg) {
  return Status::error(formatError(posOf(path, n), msg));
}

Status checkKeys(const std::string &path, const YAML::Node &map,
                 const std::set<std::string> &allowed, const std::string &what) {
  std::string list;
  for (const auto &a : allowed)
    list += (list.empty() ? "" : ", ") + a;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // A key that is a list or a map (YAML's `? [a, b]`) is no name at all.
    if (!it->first.IsScalar())
      return errorAt(path, it->first,
                     fmt::format("a key in {} is not a name; expected one of: {}", what, list));
    const std::string &key = it->first.Scalar();
    if (!allowed.count(key))
      return errorAt(path, it->first,
                     fmt::format("unknown key '{}' in {}; expected one of: {}", key, what, list));
  }
  return Status::ok();
}

Status parseShape(const std::string &path, const YAML::Node &n, InputSpecEntry &e) {
  if (!n.IsSequence())
    return errorAt(path, n, "'shape' must be a list of positive integers, e.g. [8, 256]");
  for (const auto &d : n) {
    int64_t v = 0;
    if (!YAML::convert<int64_t>::decode(d, v) || v < 0)
      return errorAt(
          path, d, fmt::format("bad dimension '{}'; expected a non-negative integer", d.Scalar()));
    e.shape.push_back(v);
  }
  return Status::ok();
}

// The sample tensor's bytes must be a number: a product of dims past int64
// is refused here, before anything is allocated (the memory check against
// this machine is the trace's, which makes the samples).
Status checkSize(const std::string &path, const YAML::Node &n, const InputSpecEntry &e) {
  int64_t bytes = ir::dtypeSize(e.dtype);
  for (int64_t d : e.shape) {
    if (d != 0 && bytes > std::numeric_limits<int64_t>::max() / d)
      return errorAt(path, n,
                     fmt::format("input '{}' of shape {} is too large: its size overflows 64 bits",
                                 e.name, ir::shapeString(e.shape)));
    bytes *= d;
  }
  return Status::ok();
}

Status parseRange(const std::string &path, const YAML::Node &n, InputSpecEntry &e) {
  double lo = 0, hi = 0;
  if (!n.IsSequence() || n.size() != 2 || !YAML::convert<double>::decode(n[0], lo) ||
      !YAML::convert<double>::decode(n[1], hi) || !(lo < hi))
    return errorAt(path, n, "'range' must be [lo, hi] with lo < hi");
  e.range = std::make_pair(lo, hi);
  return Status::ok();
}

Expected<InputSpecEntry> parseEntry(const std::string &path, const YAML::Node &n) {
  if (!n.IsMap())
    return errorAt(path, n, "each input must be a map with 'name', 'shape', 'dtype'");
  NNSC_RETURN_IF_ERROR(
      checkKeys(path, n, {"name", "shape", "dtype", "range", "file"}, "an input entry"));
  InputSpecEntry e;
  e.pos = posOf(path, n);
  if (!n["name"] || !n["name"].IsScalar())
    return errorAt(path, n, "input entry lacks 'name'");
  e.name = n["name"].Scalar();
  if (n["file"]) {
    auto dir = std::filesystem::path(path).parent_path();
    e.file = (dir / n["file"].Scalar()).string();
  }
  if (!n["shape"] && e.file.empty())
    return errorAt(path, n, fmt::format("input '{}' lacks 'shape' (or 'file')", e.name));
  if (n["shape"])
    NNSC_RETURN_IF_ERROR(parseShape(path, n["shape"], e));
  if (n["dtype"]) {
    auto dt = ir::parseDType(n["dtype"].Scalar());
    if (!dt)
      return errorAt(path, n["dtype"],
                     fmt::format("unknown dtype '{}'; expected one of: float32, float16, "
                                 "bfloat16, float64, int64, int32, int16, int8, uint8, bool",
                                 n["dtype"].Scalar()));
    e.dtype = *dt;
  }
  if (n["range"])
    NNSC_RETURN_IF_ERROR(parseRange(path, n["range"], e));
  NNSC_RETURN_IF_ERROR(checkSize(path, n["shape"] ? n["shape"] : n, e));
  return e;
}

} // namespace

Expected<InputSpec> readInputSpec(const std::string &path) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parseInputSpec(*text, path);
}

Expected<InputSpec> parseInputSpec(const std::string &text, const std::string &path) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception &ex) {
    SourcePos pos{path, ex.mark.line + 1, ex.mark.column + 1};
    return Status::error(formatErrorWithSnippet(pos, ex.msg, text));
  }
  if (!root.IsMap())
    return Status::error(formatError({path, 1, 1}, "expected a map with key 'inputs'"));
  NNSC_RETURN_IF_ERROR(checkKeys(path, root, {"inputs"}, "the input spec"));
  if (!root["inputs"] || !root["inputs"].IsSequence())
    return Status::error(formatError({path, 1, 1}, "'inputs' must be a list of input entries"));
  InputSpec spec;
  spec.path = path;
  for (const auto &n : root["inputs"]) {
    auto e = parseEntry(path, n);
    if (!e)
      return e.status();
    spec.entries.push_back(e.take());
  }
  return spec;
}

} // namespace nnsc::trace
