// Reading comm tables (CommTable.h, docs/cost-model.md).
#include <fmt/format.h>

#include "nnsc/Cost/YamlReader.h"
#include "nnsc/Cost/CommTable.h"
#include "nnsc/Support/File.h"

namespace nnsc::cost {

namespace {

class CommTableReader {
public:
  CommTableReader(const std::string &text, const std::string &path) : r_(path, text) {
    table_.path = path;
  }
  Expected<CommTable> read();

private:
  Status readHeader(const YAML::Node &root);
  Status readCurve(const YAML::Node &n, size_t index);
  Status readPoints(const YAML::Node &n, const std::string &what, CommCurve &curve);
  Expected<std::string> field(const YAML::Node &map, const char *key, const std::string &what);

  YamlReader r_;
  CommTable table_;
};

Expected<std::string> CommTableReader::field(const YAML::Node &map, const char *key,
                                             const std::string &what) {
  auto n = r_.require(map, key, what);
  if (!n)
    return n.status();
  return r_.string(*n, key);
}

Status CommTableReader::readHeader(const YAML::Node &root) {
  NNSC_RETURN_IF_ERROR(
      r_.checkKeys(root, {"version", "backend", "device", "sources", "curves"}, "the comm table"));
  auto version = r_.require(root, "version", "the comm table");
  if (!version)
    return version.status();
  auto v = r_.integer(*version, "version", 1);
  if (!v)
    return v.status();
  if (*v != 1)
    return r_.errorAt(*version, fmt::format("unsupported comm table version {}; expected 1", *v));
  auto backend = field(root, "backend", "the comm table");
  if (!backend)
    return backend.status();
  if (*backend != "nccl" && *backend != "gloo")
    return r_.errorAt(root["backend"],
                      fmt::format("unknown backend '{}'; expected one of: gloo, nccl", *backend));
  table_.backend = *backend;
  auto device = field(root, "device", "the comm table");
  if (!device)
    return device.status();
  table_.device = *device;
  if (YAML::Node s = root["sources"]) {
    if (!s.IsSequence())
      return r_.errorAt(s, "'sources' must be a list of strings");
    for (const YAML::Node &e : s) {
      auto text = r_.string(e, "sources");
      if (!text)
        return text.status();
      table_.sources.push_back(*text);
    }
  }
  return Status::ok();
}

Status CommTableReader::readPoints(const YAML::Node &n, const std::string &what, CommCurve &curve) {
  if (!n.IsSequence())
    return r_.errorAt(n, what + ": 'points' must be a list of [bytes, seconds]");
  size_t i = 0;
  for (const YAML::Node &p : n) {
    ++i;
    if (!p.IsSequence() || p.size() != 2)
      return r_.errorAt(p, fmt::format("{}: point {}: expected [bytes, seconds]", what, i));
    auto bytes = r_.number(p[0], fmt::format("{}: point {}: bytes", what, i), true);
    if (!bytes)
      return bytes.status();
    auto seconds = r_.number(p[1], fmt::format("{}: point {}: seconds", what, i), true);
    if (!seconds)
      return seconds.status();
    curve.points.emplace_back(*bytes, *seconds);
  }
  return Status::ok();
}

Status CommTableReader::readCurve(const YAML::Node &n, size_t index) {
  std::string what = fmt::format("curve {}", index);
  NNSC_RETURN_IF_ERROR(r_.checkKeys(n, {"collective", "group", "placement", "points"}, what));
  CommCurve curve;
  auto coll = field(n, "collective", what);
  if (!coll)
    return coll.status();
  auto c = parseCollective(*coll);
  if (!c)
    return r_.errorAt(n["collective"],
                      fmt::format("{}: unknown collective '{}'; expected one of: all_gather, "
                                  "all_reduce, all_to_all, broadcast, reduce_scatter, send_recv",
                                  what, *coll));
  curve.collective = *c;
  auto groupNode = r_.require(n, "group", what);
  if (!groupNode)
    return groupNode.status();
  auto group = r_.integer(*groupNode, what + ": group", 2);
  if (!group)
    return group.status();
  curve.group = static_cast<int>(*group);
  auto place = field(n, "placement", what);
  if (!place)
    return place.status();
  if (*place != "intra" && *place != "inter")
    return r_.errorAt(n["placement"], fmt::format("{}: unknown placement '{}'; expected one of: "
                                                  "inter, intra",
                                                  what, *place));
  curve.placement = *place == "intra" ? Placement::Intra : Placement::Inter;
  what = fmt::format("curve {} ({}, group {}, {})", index, *coll, curve.group, *place);
  auto points = r_.require(n, "points", what);
  if (!points)
    return points.status();
  NNSC_RETURN_IF_ERROR(readPoints(*points, what, curve));
  int bad = -1;
  std::string problem = table_.problemWith(curve, bad);
  if (!problem.empty())
    return r_.errorAt(bad >= 0 ? (*points)[static_cast<size_t>(bad)] : n, problem);
  return table_.add(std::move(curve));
}

Expected<CommTable> CommTableReader::read() {
  auto root = r_.root();
  if (!root)
    return root.status();
  NNSC_RETURN_IF_ERROR(readHeader(*root));
  auto curves = r_.require(*root, "curves", "the comm table");
  if (!curves)
    return curves.status();
  if (!curves->IsSequence())
    return r_.errorAt(*curves, "'curves' must be a list");
  size_t i = 0;
  for (const YAML::Node &c : *curves)
    NNSC_RETURN_IF_ERROR(readCurve(c, ++i));
  return table_;
}

} // namespace

Expected<CommTable> parseCommTable(const std::string &text, const std::string &path) {
  return CommTableReader(text, path).read();
}

Expected<CommTable> loadCommTable(const std::string &path) {
  auto text = readFile(path);
  if (!text)
    return text.status();
  return parseCommTable(*text, path);
}

} // namespace nnsc::cost
