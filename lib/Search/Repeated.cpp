// Folding repeated decisions into one (Repeated.h).
#include "nnsc/Search/Repeated.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace nnsc::search {

namespace {

struct Folded {
  Problem problem;
  std::vector<int> keptOf; ///< per decision of p: its index in the folded problem
  std::vector<int> kept;   ///< per folded node: the decision of p
  /// Edges that fold backwards (or onto one decision): from, to (folded).
  std::vector<Edge> backward;
};

Status checkRepresentatives(const Problem &p, const std::vector<int> &rep) {
  if (rep.size() != p.nodes.size())
    return errorf("error: {} representatives for {} decisions", rep.size(), p.nodes.size());
  for (size_t d = 0; d < rep.size(); ++d) {
    int r = rep[d];
    if (r < 0 || static_cast<size_t>(r) > d || rep[static_cast<size_t>(r)] != r ||
        p.nodes[static_cast<size_t>(r)].size() != p.nodes[d].size())
      return errorf("error: decision {} cannot be represented by decision {}", d, r);
  }
  return Status::ok();
}

Folded fold(const Problem &p, const std::vector<int> &rep) {
  Folded f;
  f.keptOf.assign(p.nodes.size(), -1);
  for (size_t d = 0; d < p.nodes.size(); ++d)
    if (rep[d] == static_cast<int>(d)) {
      f.keptOf[d] = static_cast<int>(f.kept.size());
      f.kept.push_back(static_cast<int>(d));
      f.problem.nodes.push_back(p.nodes[d]);
      f.problem.nodeNames.push_back(d < p.nodeNames.size() ? p.nodeNames[d] : "");
    }
  for (size_t d = 0; d < p.nodes.size(); ++d) {
    if (rep[d] == static_cast<int>(d))
      continue;
    auto &into = f.problem.nodes[static_cast<size_t>(f.keptOf[static_cast<size_t>(rep[d])])];
    for (size_t o = 0; o < into.size(); ++o) {
      into[o].time += p.nodes[d][o].time;
      into[o].memory += p.nodes[d][o].memory;
    }
  }
  std::map<std::pair<int, int>, size_t> index;
  for (const Edge &e : p.edges) {
    int a = f.keptOf[static_cast<size_t>(rep[static_cast<size_t>(e.from)])];
    int b = f.keptOf[static_cast<size_t>(rep[static_cast<size_t>(e.to)])];
    auto [it, fresh] = index.emplace(std::make_pair(a, b), 0);
    std::vector<Edge> &list = a < b ? f.problem.edges : f.backward;
    if (fresh) {
      it->second = list.size();
      Edge folded;
      folded.from = a;
      folded.to = b;
      folded.cost.assign(e.cost.size(), 0.0);
      list.push_back(std::move(folded));
    }
    Edge &into = list[it->second];
    for (size_t c = 0; c < e.cost.size(); ++c)
      into.cost[c] += e.cost[c];
  }
  f.problem.memoryLimit = p.memoryLimit;
  return f;
}

// The folded problem with the backward edges' sources fixed to `fixed`
// (folded node -> option): each such source keeps that one option, and
// each backward edge becomes a price on its target's options.
Problem fixSources(const Folded &f, const std::map<int, int> &fixed, std::vector<int> &optionMap) {
  Problem q = f.problem;
  for (const Edge &e : f.backward) {
    int a = fixed.at(e.from);
    int toOptions = static_cast<int>(f.problem.nodes[static_cast<size_t>(e.to)].size());
    for (int b = 0; b < toOptions; ++b) {
      // A self-edge (the source is its own target) only prices the fixed option.
      if (e.from == e.to && b != a)
        continue;
      q.nodes[static_cast<size_t>(e.to)][static_cast<size_t>(b)].time += e.at(a, b, toOptions);
    }
  }
  optionMap.assign(q.nodes.size(), -1);
  std::vector<int> width(q.nodes.size());
  for (size_t n = 0; n < q.nodes.size(); ++n)
    width[n] = static_cast<int>(q.nodes[n].size());
  for (const auto &[node, option] : fixed) {
    auto &opts = q.nodes[static_cast<size_t>(node)];
    opts = {opts[static_cast<size_t>(option)]};
    optionMap[static_cast<size_t>(node)] = option;
  }
  // Edges touching a fixed node keep only its row or column.
  for (Edge &e : q.edges) {
    int fromOpts = width[static_cast<size_t>(e.from)], toOpts = width[static_cast<size_t>(e.to)];
    int fa = optionMap[static_cast<size_t>(e.from)], fb = optionMap[static_cast<size_t>(e.to)];
    if (fa < 0 && fb < 0)
      continue;
    std::vector<double> cost;
    for (int a = 0; a < fromOpts; ++a)
      for (int b = 0; b < toOpts; ++b)
        if ((fa < 0 || a == fa) && (fb < 0 || b == fb))
          cost.push_back(e.at(a, b, toOpts));
    e.cost = std::move(cost);
  }
  return q;
}

} // namespace

Expected<Solution> solveRepeated(const Problem &p, const std::vector<int> &representative,
                                 const DpLimits &limits, const RepeatLimits &repeat) {
  NNSC_RETURN_IF_ERROR(validateProblem(p));
  NNSC_RETURN_IF_ERROR(checkRepresentatives(p, representative));
  Folded f = fold(p, representative);
  std::vector<int> sources; // folded nodes whose options are fixed in turn
  for (const Edge &e : f.backward)
    if (std::find(sources.begin(), sources.end(), e.from) == sources.end())
      sources.push_back(e.from);
  int64_t fixings = 1;
  for (int s : sources) {
    fixings *= static_cast<int64_t>(f.problem.nodes[static_cast<size_t>(s)].size());
    if (fixings > repeat.maxFixings)
      return errorf("error: the repeats' backward edges need more than {} fixings",
                    repeat.maxFixings);
  }
  std::optional<Solution> best;
  Status last = Status::ok();
  for (int64_t k = 0; k < fixings; ++k) {
    std::map<int, int> fixed;
    int64_t rest = k;
    for (int s : sources) {
      int64_t r = static_cast<int64_t>(f.problem.nodes[static_cast<size_t>(s)].size());
      fixed[s] = static_cast<int>(rest % r);
      rest /= r;
    }
    std::vector<int> optionMap;
    Problem q = fixSources(f, fixed, optionMap);
    auto sol = solveDp(q, limits);
    if (!sol) {
      last = sol.status();
      continue;
    }
    Solution expanded;
    std::vector<int> foldedChoice(q.nodes.size());
    for (size_t n = 0; n < q.nodes.size(); ++n)
      foldedChoice[n] = optionMap[n] >= 0 ? optionMap[n] : sol->choice[n];
    expanded.choice.resize(p.nodes.size());
    for (size_t d = 0; d < p.nodes.size(); ++d)
      expanded.choice[d] = foldedChoice[static_cast<size_t>(
          f.keptOf[static_cast<size_t>(representative[d])])];
    Solution full = evaluate(p, expanded.choice);
    if (!best || canonical(full.time) < canonical(best->time))
      best = std::move(full);
  }
  if (!best)
    return last;
  return *best;
}

Expected<double> leastMemoryRepeated(const Problem &p, const std::vector<int> &rep) {
  NNSC_RETURN_IF_ERROR(checkRepresentatives(p, rep));
  std::vector<std::vector<double>> summed(p.nodes.size());
  for (size_t d = 0; d < p.nodes.size(); ++d) {
    auto &into = summed[static_cast<size_t>(rep[d])];
    into.resize(p.nodes[d].size(), 0.0);
    for (size_t o = 0; o < p.nodes[d].size(); ++o)
      into[o] += p.nodes[d][o].memory;
  }
  double least = 0;
  for (const std::vector<double> &options : summed)
    if (!options.empty())
      least += *std::min_element(options.begin(), options.end());
  return least;
}

} // namespace nnsc::search
