// The communication table's names and its YAML text.
#include "nnsc/Profile/CommTable.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "YamlText.h"

namespace nnsc::profile {

namespace {

std::string trimmed(std::string s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

} // namespace

const std::vector<Collective> &allCollectives() {
  static const std::vector<Collective> all = {Collective::AllReduce,     Collective::AllGather,
                                              Collective::ReduceScatter, Collective::AllToAll,
                                              Collective::Broadcast,     Collective::SendRecv};
  return all;
}

const char *collectiveName(Collective c) {
  switch (c) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllToAll:
    return "all_to_all";
  case Collective::Broadcast:
    return "broadcast";
  case Collective::SendRecv:
    return "send_recv";
  }
  return "?";
}

Expected<std::vector<Collective>> parseCollectives(const std::string &list) {
  std::vector<bool> chosen(allCollectives().size(), false);
  std::stringstream in(list);
  std::string item;
  bool any = false;
  while (std::getline(in, item, ',')) {
    item = trimmed(item);
    if (item == "all") {
      std::fill(chosen.begin(), chosen.end(), true);
      any = true;
      continue;
    }
    auto it = std::find_if(allCollectives().begin(), allCollectives().end(),
                           [&](Collective c) { return item == collectiveName(c); });
    if (it == allCollectives().end()) {
      std::vector<std::string> names;
      for (Collective c : allCollectives())
        names.push_back(collectiveName(c));
      return errorf("unknown collective '{}'; expected one of: {}, all", item,
                    fmt::join(names, ", "));
    }
    chosen[size_t(it - allCollectives().begin())] = true;
    any = true;
  }
  if (!any)
    return errorf("no collective named in '{}'", list);
  std::vector<Collective> out;
  for (size_t i = 0; i < chosen.size(); ++i)
    if (chosen[i])
      out.push_back(allCollectives()[i]);
  return out;
}

std::string formatReal(double value) {
  // "{:.3e}" always writes a '.' and a signed exponent; drop trailing zeros of
  // the mantissa but keep one digit after the point.
  std::string s = fmt::format("{:.3e}", value);
  size_t e = s.find('e');
  std::string mantissa = s.substr(0, e), exponent = s.substr(e);
  while (mantissa.size() > 3 && mantissa.back() == '0' && mantissa[mantissa.size() - 2] != '.')
    mantissa.pop_back();
  return mantissa + exponent;
}

std::string formatCommTable(const CommTable &t) {
  std::string out;
  out += fmt::format("version: {}\n", t.version);
  out += fmt::format("backend: {}\n", t.backend);
  out += fmt::format("device: {}\n", yamlScalar(t.device));
  out += "sources:\n";
  for (const std::string &s : t.sources)
    out += fmt::format("  - {}\n", yamlQuoted(s));
  out += t.curves.empty() ? "curves: []\n" : "curves:\n";
  for (const CommCurve &c : t.curves) {
    out += fmt::format("  - collective: {}\n", c.collective);
    out += fmt::format("    group: {}\n", c.group);
    out += fmt::format("    placement: {}\n", c.placement);
    out += "    points:\n";
    for (const auto &[bytes, seconds] : c.points)
      out += fmt::format("      - [{}, {}]\n", bytes, formatReal(seconds));
  }
  return out;
}

} // namespace nnsc::profile
