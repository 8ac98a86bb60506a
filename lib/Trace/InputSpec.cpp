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
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // A key that is a list or a map (YAML's `? [a, b]`) is no name at all.
    if (!it->first.IsScalar())
      return errorAt(path, it->first,
                     fmt::format("a key in {} is not a name; expected one of: {}", what, list));
    const std::string &key = it->first.Scalar();
    if (!allowed.count(key))
      return errorAt(path, it->first,
                     fmt::format("unknown key '{}' in {}; expected one of: {}", key, what, list));
    if (!seen.insert(key).second) // yaml-cpp keeps the first silently
      return errorAt(path, it->first, fmt::format("duplicate key '{}' in {}", key, what));
  }
  return Status::ok();
}

Status parseShape(const std::string &path, const YAML::Node &n, InputSpecEntry &e) {
  if (!n.IsSequence())
    return errorAt(path, n, "'shape' must be a list of positive integers, e.g. [8, 256]");
  for (const auto &d : n) {
    int64_t v = 0;
    // 0 would make empty batches: a model trained on them learns nothing (loss nan).
    if (!YAML::convert<int64_t>::decode(d, v) || v <= 0)
      return errorAt(path, d,
                     fmt::format("bad dimension '{}'; expected a positive integer", d.Scalar()));
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

// The samples are drawn from [lo, hi) in the input's dtype: integer bounds
// must fit it (hi is exclusive), floating ones and their width must be finite
// in it. Checked once the dtype is known, before anything is drawn.
Status checkRangeFits(const std::string &path, const YAML::Node &n, const InputSpecEntry &e) {
  auto [lo, hi] = *e.range;
  double least = 0, most = 0;
  switch (e.dtype) {
  case ir::DType::Float16: least = -65504.0, most = 65504.0; break;
  case ir::DType::BFloat16: least = -3.3895313892515355e38, most = 3.3895313892515355e38; break;
  case ir::DType::Float32: least = -3.4028234663852886e38, most = 3.4028234663852886e38; break;
  case ir::DType::Float64: least = -1.7976931348623157e308, most = 1.7976931348623157e308; break;
  case ir::DType::Int8: least = -128, most = 128; break;
  case ir::DType::UInt8: least = 0, most = 256; break;
  case ir::DType::Int16: least = -32768, most = 32768; break;
  case ir::DType::Int32: least = -2147483648.0, most = 2147483648.0; break;
  case ir::DType::Bool: least = 0, most = 2; break;
  default: least = -9223372036854775808.0, most = 9223372036854775807.0; break; // < 2^63
  }
  bool floating = ir::isFloatingPoint(e.dtype);
  bool fits = floating ? lo >= least && hi <= most && hi - lo <= most
                       : lo >= least && (e.dtype == ir::DType::Int64 ? hi < most : hi <= most);
  if (fits)
    return Status::ok();
  return errorAt(path, n,
                 fmt::format("'range' [{}, {}] does not fit {}: samples are drawn from [lo, hi) "
                             "and must be {} {}",
                             n[0].Scalar(), n[1].Scalar(), ir::dtypeName(e.dtype),
                             floating ? "finite" : "representable", "in it"));
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
  if (n["range"]) {
    NNSC_RETURN_IF_ERROR(parseRange(path, n["range"], e));
    NNSC_RETURN_IF_ERROR(checkRangeFits(path, n["range"], e));
  }
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
