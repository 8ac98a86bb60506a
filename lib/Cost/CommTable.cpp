// Comm table lookup: piecewise-linear over bytes, ring-model scaling over
// group sizes.
#include "nnsc/Cost/CommTable.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace nnsc::cost {

namespace {

struct CollectiveName {
  Collective c;
  const char *name;
};
constexpr CollectiveName kNames[] = {
    {Collective::AllReduce, "all_reduce"},         {Collective::AllGather, "all_gather"},
    {Collective::ReduceScatter, "reduce_scatter"}, {Collective::AllToAll, "all_to_all"},
    {Collective::Broadcast, "broadcast"},          {Collective::SendRecv, "send_recv"}};

} // namespace

const char *collectiveName(Collective c) {
  for (const auto &n : kNames)
    if (n.c == c)
      return n.name;
  return "?";
}

std::optional<Collective> parseCollective(const std::string &name) {
  for (const auto &n : kNames)
    if (name == n.name)
      return n.c;
  return std::nullopt;
}

const char *placementName(Placement p) { return p == Placement::Intra ? "intra" : "inter"; }

double busFactor(Collective c, int group) {
  if (group <= 1)
    return 0;
  double g = group;
  switch (c) {
  case Collective::AllReduce:
    return 2 * (g - 1) / g;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return (g - 1) / g;
  case Collective::Broadcast:
  case Collective::SendRecv:
    return 1;
  }
  return 1;
}

double CommCurve::time(double bytes) const {
  if (points.empty())
    return 0;
  if (bytes <= points.front().first)
    return points.front().second;
  if (bytes >= points.back().first) {
    const auto &last = points.back();
    if (points.size() == 1) // one point: its bandwidth beyond it
      return last.second * bytes / last.first;
    const auto &prev = points[points.size() - 2];
    double slope = (last.second - prev.second) / (last.first - prev.first);
    return last.second + std::max(slope, 0.0) * (bytes - last.first);
  }
  auto hi = std::lower_bound(points.begin(), points.end(), bytes,
                             [](const auto &p, double b) { return p.first < b; });
  auto lo = hi - 1;
  double f = (bytes - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

std::string CommTable::problemWith(const CommCurve &curve, int &badPoint) const {
  badPoint = -1;
  std::string what =
      fmt::format("curve {} ({}, group {}, {})", curves_.size() + 1,
                  collectiveName(curve.collective), curve.group, placementName(curve.placement));
  for (const CommCurve &c : curves_)
    if (c.collective == curve.collective && c.group == curve.group &&
        c.placement == curve.placement)
      return what + ": duplicate of an earlier curve";
  if (curve.group < 2)
    return what + ": group must be at least 2";
  if (curve.points.empty())
    return what + ": no points";
  for (size_t i = 0; i < curve.points.size(); ++i) {
    badPoint = static_cast<int>(i);
    const auto &[bytes, seconds] = curve.points[i];
    if (!(seconds > 0))
      return fmt::format("{}: point {}: time {:g} not positive", what, i + 1, seconds);
    if (!(bytes > 0))
      return fmt::format("{}: point {}: bytes {:g} not positive", what, i + 1, bytes);
    if (i > 0 && !(bytes > curve.points[i - 1].first))
      return fmt::format("{}: point {}: bytes {:g} not above {:g}", what, i + 1, bytes,
                         curve.points[i - 1].first);
  }
  badPoint = -1;
  return "";
}

Status CommTable::add(CommCurve curve) {
  int badPoint = -1;
  std::string problem = problemWith(curve, badPoint);
  if (!problem.empty())
    return Status::error(problem);
  curves_.push_back(std::move(curve));
  return Status::ok();
}

bool CommTable::has(Collective c, Placement placement) const {
  return std::any_of(curves_.begin(), curves_.end(), [&](const CommCurve &k) {
    return k.collective == c && k.placement == placement;
  });
}

namespace {

// `curve`'s time for `bytes` at group size `group`: its latency (first
// point) kept, the rest scaled by the ring bus factors.
double scaledTime(const CommCurve &curve, double bytes, int group) {
  double t = curve.time(bytes);
  if (group == curve.group)
    return t;
  double alpha = std::min(curve.points.front().second, t);
  double ratio = busFactor(curve.collective, group) / busFactor(curve.collective, curve.group);
  return alpha + (t - alpha) * ratio;
}

} // namespace

Expected<double> CommTable::time(Collective c, int64_t bytes, int group,
                                 Placement placement) const {
  if (group <= 1 || bytes <= 0)
    return 0.0;
  const CommCurve *below = nullptr, *above = nullptr;
  for (const CommCurve &k : curves_) {
    if (k.collective != c || k.placement != placement)
      continue;
    if (k.group <= group && (!below || k.group > below->group))
      below = &k;
    if (k.group >= group && (!above || k.group < above->group))
      above = &k;
  }
  if (!below && !above)
    return errorf("{}: error: no {} curve for {} groups (the table has none for any group size)",
                  path.empty() ? "<comm table>" : path, collectiveName(c),
                  placementName(placement));
  double b = static_cast<double>(bytes);
  if (!below)
    return scaledTime(*above, b, group);
  if (!above || below == above)
    return scaledTime(*below, b, group);
  // Between two measured group sizes: interpolate their scaled predictions.
  double f = double(group - below->group) / double(above->group - below->group);
  return (1 - f) * scaledTime(*below, b, group) + f * scaledTime(*above, b, group);
}

} // namespace nnsc::cost
