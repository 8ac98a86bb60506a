// Exact solvers of the plan search (Solver.h).
#include "nnsc/Search/Solver.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

namespace nnsc::search {

double canonical(double x) {
  if (x == 0 || !std::isfinite(x))
    return x;
  int e = std::ilogb(x);
  return std::ldexp(std::nearbyint(std::ldexp(x, 40 - e)), e - 40);
}

namespace {

std::string nodeName(const Problem &p, int i) {
  if (static_cast<size_t>(i) < p.nodeNames.size() && !p.nodeNames[static_cast<size_t>(i)].empty())
    return fmt::format("node {} ({})", i, p.nodeNames[static_cast<size_t>(i)]);
  return fmt::format("node {}", i);
}

int optionCount(const Problem &p, int i) {
  return static_cast<int>(p.nodes[static_cast<size_t>(i)].size());
}

// A partial assignment's totals and where it came from.
struct Entry {
  double memory = 0, time = 0;
  int64_t prevState = -1; ///< index into the previous layer's states
  int64_t prevEntry = -1;
  int option = -1; ///< this layer's node's option
};

// The states after one node: the frontier's options (mixed-radix keys) and
// each state's Pareto set of entries.
struct Layer {
  std::vector<int> frontier; ///< node ids, ascending
  std::vector<int64_t> keys;
  std::vector<std::vector<Entry>> entries;
  std::unordered_map<int64_t, size_t> index;

  std::vector<Entry> &stateFor(int64_t key) {
    auto [it, fresh] = index.emplace(key, keys.size());
    if (fresh) {
      keys.push_back(key);
      entries.emplace_back();
    }
    return entries[it->second];
  }
};

// Decodes `key` into the options of `frontier` (mixed radix, first node lowest).
void decode(const Problem &p, const std::vector<int> &frontier, int64_t key,
            std::vector<int> &optionOf) {
  for (int n : frontier) {
    int64_t r = optionCount(p, n);
    optionOf[static_cast<size_t>(n)] = static_cast<int>(key % r);
    key /= r;
  }
}

int64_t encode(const Problem &p, const std::vector<int> &frontier,
               const std::vector<int> &optionOf) {
  int64_t key = 0, scale = 1;
  for (int n : frontier) {
    key += optionOf[static_cast<size_t>(n)] * scale;
    scale *= optionCount(p, n);
  }
  return key;
}

// Keeps the entries no other beats on both memory and time; past `limit`
// points, an even spread over memory (the extremes always kept). Totals are
// compared rounded (canonical), each rounded once: the sort compares an entry
// about log n times, and canonical is four libm calls (rounding inside the
// comparison made it most of the unfolded search's time).
void paretoPrune(std::vector<Entry> &es, int64_t limit) {
  struct Key {
    double memory, time;
    size_t entry;
  };
  std::vector<Key> keys;
  keys.reserve(es.size());
  for (size_t i = 0; i < es.size(); ++i)
    keys.push_back({canonical(es[i].memory), canonical(es[i].time), i});
  std::stable_sort(keys.begin(), keys.end(), [](const Key &a, const Key &b) {
    return a.memory != b.memory ? a.memory < b.memory : a.time < b.time;
  });
  std::vector<Entry> kept;
  double keptTime = 0;
  for (const Key &k : keys)
    if (kept.empty() || k.time < keptTime) {
      kept.push_back(es[k.entry]);
      keptTime = k.time;
    }
  if (static_cast<int64_t>(kept.size()) > limit && limit >= 2) {
    std::vector<Entry> thin;
    double step = double(kept.size() - 1) / double(limit - 1);
    for (int64_t k = 0; k < limit; ++k)
      thin.push_back(kept[static_cast<size_t>(std::llround(double(k) * step))]);
    kept.swap(thin);
  }
  es.swap(kept);
}

struct Graph {
  std::vector<std::vector<const Edge *>> incoming; ///< per node
  std::vector<int> lastUse;                        ///< last consumer of each node, -1 none
};

Graph indexEdges(const Problem &p) {
  Graph g;
  g.incoming.resize(p.nodes.size());
  g.lastUse.assign(p.nodes.size(), -1);
  for (const Edge &e : p.edges) {
    g.incoming[static_cast<size_t>(e.to)].push_back(&e);
    g.lastUse[static_cast<size_t>(e.from)] = std::max(g.lastUse[static_cast<size_t>(e.from)], e.to);
  }
  return g;
}

// One DP step: every state of `prev` times every option of node i.
Expected<Layer> advance(const Problem &p, const Graph &g, const Layer &prev, int i,
                        const DpLimits &limits) {
  Layer next;
  for (int n : prev.frontier)
    if (g.lastUse[static_cast<size_t>(n)] > i)
      next.frontier.push_back(n);
  if (g.lastUse[static_cast<size_t>(i)] > i)
    next.frontier.push_back(i);
  double states = 1;
  for (int n : next.frontier)
    states *= optionCount(p, n);
  if (states > double(limits.maxStates))
    return errorf("error: the search is too wide at {}: {} nodes live at once with {:.3g} option "
                  "combinations (limit {})",
                  nodeName(p, i), next.frontier.size(), states, limits.maxStates);
  std::vector<int> optionOf(p.nodes.size(), 0);
  const double slack = std::isfinite(p.memoryLimit) ? p.memoryLimit * 1e-12 : 0;
  for (size_t s = 0; s < prev.keys.size(); ++s) {
    decode(p, prev.frontier, prev.keys[s], optionOf);
    for (int o = 0; o < optionCount(p, i); ++o) {
      const Option &opt = p.nodes[static_cast<size_t>(i)][static_cast<size_t>(o)];
      double add = opt.time;
      for (const Edge *e : g.incoming[static_cast<size_t>(i)])
        add += e->at(optionOf[static_cast<size_t>(e->from)], o, optionCount(p, i));
      optionOf[static_cast<size_t>(i)] = o;
      std::vector<Entry> &target = next.stateFor(encode(p, next.frontier, optionOf));
      const std::vector<Entry> &from = prev.entries[s];
      for (size_t k = 0; k < from.size(); ++k) {
        double memory = from[k].memory + opt.memory;
        if (memory <= p.memoryLimit + slack)
          target.push_back({memory, from[k].time + add, int64_t(s), int64_t(k), o});
      }
    }
  }
  // Drop the states every entry of which went past the memory limit.
  Layer kept;
  kept.frontier = next.frontier;
  for (size_t s = 0; s < next.keys.size(); ++s) {
    if (next.entries[s].empty())
      continue;
    paretoPrune(next.entries[s], limits.maxParetoPoints);
    kept.stateFor(next.keys[s]) = std::move(next.entries[s]);
  }
  return kept;
}

} // namespace

Status validateProblem(const Problem &p) {
  const int n = static_cast<int>(p.nodes.size());
  for (int i = 0; i < n; ++i)
    if (p.nodes[static_cast<size_t>(i)].empty())
      return errorf("error: {} has no option", nodeName(p, i));
  for (size_t k = 0; k < p.edges.size(); ++k) {
    const Edge &e = p.edges[k];
    if (e.from < 0 || e.to >= n || e.from >= e.to)
      return errorf("error: edge {} goes from node {} to node {}; edges go forward between "
                    "nodes 0..{}",
                    k, e.from, e.to, n - 1);
    size_t want = p.nodes[static_cast<size_t>(e.from)].size() *
                  p.nodes[static_cast<size_t>(e.to)].size();
    if (e.cost.size() != want)
      return errorf("error: edge {} ({} -> {}) has {} costs; its nodes' options make {}", k,
                    e.from, e.to, e.cost.size(), want);
  }
  return Status::ok();
}

Solution evaluate(const Problem &p, const std::vector<int> &choice) {
  Solution s;
  s.choice = choice;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    s.time += p.nodes[i][static_cast<size_t>(choice[i])].time;
    s.memory += p.nodes[i][static_cast<size_t>(choice[i])].memory;
  }
  for (const Edge &e : p.edges)
    s.time += e.at(choice[static_cast<size_t>(e.from)], choice[static_cast<size_t>(e.to)],
                   optionCount(p, e.to));
  return s;
}

Expected<Solution> solveDp(const Problem &p, const DpLimits &limits) {
  NNSC_RETURN_IF_ERROR(validateProblem(p));
  Graph g = indexEdges(p);
  std::vector<Layer> layers(1);
  layers[0].stateFor(0).push_back(Entry{});
  for (int i = 0; i < static_cast<int>(p.nodes.size()); ++i) {
    auto next = advance(p, g, layers.back(), i, limits);
    if (!next)
      return next.status();
    if (next->keys.empty())
      return noPlanFits(p);
    layers.push_back(next.take());
  }
  // The last frontier is empty: one state, its fastest entry.
  const std::vector<Entry> &last = layers.back().entries[0];
  size_t best = 0;
  for (size_t k = 1; k < last.size(); ++k)
    if (canonical(last[k].time) < canonical(last[best].time))
      best = k;
  std::vector<int> choice(p.nodes.size(), 0);
  int64_t state = 0, entry = int64_t(best);
  for (size_t l = layers.size() - 1; l >= 1; --l) {
    const Entry &e = layers[l].entries[static_cast<size_t>(state)][static_cast<size_t>(entry)];
    choice[l - 1] = e.option;
    state = e.prevState;
    entry = e.prevEntry;
  }
  return evaluate(p, choice);
}

Expected<Solution> solveBruteForce(const Problem &p, int64_t maxAssignments) {
  NNSC_RETURN_IF_ERROR(validateProblem(p));
  double count = 1;
  for (const auto &opts : p.nodes)
    count *= double(opts.size());
  if (count > double(maxAssignments))
    return errorf("error: {:.3g} assignments; brute force takes at most {}", count,
                  maxAssignments);
  std::vector<int> choice(p.nodes.size(), 0);
  std::optional<Solution> best;
  while (true) {
    Solution s = evaluate(p, choice);
    if (s.memory <= p.memoryLimit && (!best || s.time < best->time))
      best = s;
    size_t i = 0;
    while (i < choice.size() && ++choice[i] == optionCount(p, int(i)))
      choice[i++] = 0;
    if (i == choice.size())
      break;
  }
  if (!best)
    return noPlanFits(p);
  return *best;
}

double leastMemory(const Problem &p) {
  double least = 0;
  for (const auto &options : p.nodes) {
    double m = options.front().memory;
    for (const Option &o : options)
      m = std::min(m, o.memory);
    least += m;
  }
  return least;
}

Status noPlanFits(const Problem &p) {
  int worst = 0;
  double worstMin = -1;
  for (int i = 0; i < static_cast<int>(p.nodes.size()); ++i) {
    double m = p.nodes[static_cast<size_t>(i)][0].memory;
    for (const Option &o : p.nodes[static_cast<size_t>(i)])
      m = std::min(m, o.memory);
    if (m > worstMin)
      worstMin = m, worst = i;
  }
  return errorf("error: no plan fits in the memory limit {:.6g}: the least memory any assignment "
                "needs is {:.6g}; the largest single need is {}'s {:.6g}",
                p.memoryLimit, leastMemory(p), nodeName(p, worst), worstMin);
}

} // namespace nnsc::search
