// OpRegistry::loadUserYaml: user annotations for custom ops (docs/formats.md).
//
//   libraries: [libmyops.so]        # relative paths: from the YAML file's folder
//   ops:
//     myops::fused_loss: ["b l d^, n^ d^, b l -> b l"]   # or one string, '|' between candidates
#include <filesystem>
#include <set>

#include <yaml-cpp/yaml.h>

#include "nnsc/Ops/Annotation.h"
#include "nnsc/Ops/OpRegistry.h"
#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/File.h"

namespace nnsc::ops {
namespace {

/// What a file declares; applied to the registry only when all of it is valid.
struct UserOps {
  std::vector<std::string> libraries;
  std::vector<std::pair<std::string, std::vector<std::string>>> ops;
};

class UserYamlReader {
public:
  UserYamlReader(std::string path, std::string text)
      : path_(std::move(path)), text_(std::move(text)) {}

  Expected<UserOps> read();

private:
  SourcePos posOf(const YAML::Node &n) const {
    return {path_, n.Mark().line + 1, n.Mark().column + 1};
  }
  Status errorAt(const YAML::Node &n, const std::string &msg) const {
    return Status::error(formatErrorWithSnippet(posOf(n), msg, text_));
  }
  Status checkTopKeys(const YAML::Node &root) const;
  Status readLibraries(const YAML::Node &n, UserOps &out) const;
  Status readOps(const YAML::Node &n, UserOps &out) const;
  Status readAnnotations(const YAML::Node &n, std::vector<std::string> &out) const;
  Status readAnnotation(const YAML::Node &scalar, std::vector<std::string> &out) const;

  std::string path_, text_;
};

Expected<UserOps> UserYamlReader::read() {
  YAML::Node root;
  try {
    root = YAML::Load(text_);
  } catch (const YAML::Exception &e) {
    SourcePos pos{path_, e.mark.line + 1, e.mark.column + 1};
    return Status::error(formatErrorWithSnippet(pos, e.msg, text_));
  }
  UserOps out;
  if (root.IsNull())
    return out;
  if (!root.IsMap())
    return errorAt(root, "expected a map with keys 'libraries' and 'ops'");
  NNSC_RETURN_IF_ERROR(checkTopKeys(root));
  if (root["libraries"])
    NNSC_RETURN_IF_ERROR(readLibraries(root["libraries"], out));
  if (root["ops"])
    NNSC_RETURN_IF_ERROR(readOps(root["ops"], out));
  return out;
}

Status UserYamlReader::checkTopKeys(const YAML::Node &root) const {
  std::set<std::string> seen;
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = it->first.Scalar();
    if (key != "libraries" && key != "ops")
      return errorAt(it->first,
                     fmt::format("unknown key '{}'; expected one of: libraries, ops", key));
    if (!seen.insert(key).second)
      return errorAt(it->first, fmt::format("duplicate key '{}'", key));
  }
  return Status::ok();
}

Status UserYamlReader::readLibraries(const YAML::Node &n, UserOps &out) const {
  if (!n.IsSequence())
    return errorAt(n, "'libraries' must be a list of shared-object paths");
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  for (const YAML::Node &lib : n) {
    if (!lib.IsScalar() || lib.Scalar().empty())
      return errorAt(lib, "each library must be a path to a shared object");
    std::filesystem::path p(lib.Scalar());
    out.libraries.push_back(p.is_absolute() ? p.string() : (dir / p).string());
  }
  return Status::ok();
}

Status UserYamlReader::readOps(const YAML::Node &n, UserOps &out) const {
  if (!n.IsMap())
    return errorAt(n, "'ops' must map op names (namespace::name) to annotations");
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string op = it->first.Scalar();
    if (op.find("::") == std::string::npos || op.rfind("::") + 2 == op.size())
      return errorAt(it->first, fmt::format("op name '{}' must be qualified: namespace::name", op));
    if (!seen.insert(op).second)
      return errorAt(it->first, fmt::format("duplicate op '{}'", op));
    std::vector<std::string> annos;
    NNSC_RETURN_IF_ERROR(readAnnotations(it->second, annos));
    out.ops.emplace_back(op, std::move(annos));
  }
  return Status::ok();
}

Status UserYamlReader::readAnnotations(const YAML::Node &n, std::vector<std::string> &out) const {
  if (n.IsScalar())
    return readAnnotation(n, out);
  if (!n.IsSequence())
    return errorAt(n, "annotations must be a string or a list of strings");
  for (const YAML::Node &item : n) {
    if (!item.IsScalar())
      return errorAt(item, "each annotation must be a string such as \"a k+, n k+ -> a n\"");
    NNSC_RETURN_IF_ERROR(readAnnotation(item, out));
  }
  return Status::ok();
}

// Parses each '|'-separated candidate of one scalar, with error columns
// counted in the file (one past an opening quote).
Status UserYamlReader::readAnnotation(const YAML::Node &scalar,
                                      std::vector<std::string> &out) const {
  SourcePos origin = posOf(scalar);
  std::string_view line = lineOf(text_, origin.line);
  size_t col = static_cast<size_t>(origin.col - 1);
  if (col < line.size() && (line[col] == '"' || line[col] == '\''))
    ++origin.col;
  const std::string &text = scalar.Scalar();
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t bar = std::min(text.find('|', begin), text.size());
    SourcePos at = origin;
    at.col += static_cast<int>(begin);
    Expected<OpAnno> anno = parseAnnotation(std::string_view(text).substr(begin, bar - begin), at);
    if (!anno)
      return anno.status();
    out.push_back(anno->text());
    begin = bar + 1;
  }
  return Status::ok();
}

} // namespace

Status OpRegistry::loadUserYaml(const std::string &path) {
  Expected<std::string> text = readFile(path);
  if (!text)
    return text.status();
  return loadUserYamlText(text.take(), path);
}

Status OpRegistry::loadUserYamlText(std::string text, const std::string &path) {
  Expected<UserOps> user = UserYamlReader(path, std::move(text)).read();
  if (!user)
    return user.status();
  for (std::string &lib : user->libraries)
    libraries_.push_back(std::move(lib));
  for (auto &[op, annos] : user->ops)
    addFixed(op, std::move(annos));
  return Status::ok();
}

} // namespace nnsc::ops
