// Which decisions repeat (Repeats.h).
#include "Repeats.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

namespace nnsc::autodist {

// The repeated block of the model: the module class with the most nodes
// among those with two or more instances (transformer layers), and its
// instances in node order.
RepeatedBlocks repeatedBlocks(const ir::Graph &graph) {
  std::map<std::string, std::vector<std::string>> paths; // class -> instances in order
  std::map<std::string, int64_t> covered;
  for (const ir::Node &node : graph.nodes()) {
    std::set<std::string> seen;
    for (const ir::ModuleFrame &f : node.moduleStack) {
      if (f.cls.empty() || !seen.insert(f.cls).second)
        continue;
      auto &list = paths[f.cls];
      if (std::find(list.begin(), list.end(), f.path) == list.end())
        list.push_back(f.path);
      ++covered[f.cls];
    }
  }
  RepeatedBlocks best;
  int64_t bestCovered = 0;
  for (const auto &[cls, list] : paths)
    if (list.size() >= 2 && covered[cls] > bestCovered) {
      best = {cls, list};
      bestCovered = covered[cls];
    }
  return best;
}

std::vector<std::pair<size_t, size_t>> instanceRanges(const ir::Graph &graph,
                                                      const RepeatedBlocks &blocks) {
  const auto &nodes = graph.nodes();
  std::map<std::string_view, size_t> index; // instance path -> its place in blocks.paths
  for (size_t i = 0; i < blocks.paths.size(); ++i)
    index.emplace(blocks.paths[i], i);
  // One pass: each instance's first and last node and how many lie inside.
  std::vector<size_t> first(blocks.paths.size(), nodes.size()), last(blocks.paths.size(), 0),
      count(blocks.paths.size(), 0);
  for (size_t k = 0; k < nodes.size(); ++k) {
    std::set<size_t> in; // a node inside an instance twice (nested frames) counts once
    for (const ir::ModuleFrame &f : nodes[k].moduleStack)
      if (auto it = index.find(f.path); it != index.end())
        in.insert(it->second);
    for (size_t i : in) {
      first[i] = std::min(first[i], k);
      last[i] = k + 1;
      ++count[i];
    }
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t i = 0; i < blocks.paths.size(); ++i) {
    if (count[i] == 0 || last[i] - first[i] != count[i])
      return {};
    ranges.emplace_back(first[i], last[i]);
  }
  for (const auto &[begin, end] : ranges) {
    if (end - begin != ranges[0].second - ranges[0].first)
      return {};
    for (size_t j = 0; j < end - begin; ++j) {
      const ir::Node &a = nodes[ranges[0].first + j], &b = nodes[begin + j];
      if (a.op != b.op || a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size())
        return {};
      for (size_t q = 0; q < a.outputs.size(); ++q)
        if (graph.tensor(a.outputs[q]).shape != graph.tensor(b.outputs[q]).shape)
          return {};
      for (size_t i = 0; i < a.inputs.size(); ++i)
        if (graph.tensor(a.inputs[i]).kind != graph.tensor(b.inputs[i]).kind ||
            graph.tensor(a.inputs[i]).shape != graph.tensor(b.inputs[i]).shape)
          return {};
    }
  }
  return ranges;
}

namespace {

bool sameOptions(const Built &built, int d, int r) {
  const auto &a = built.problem.nodes[static_cast<size_t>(d)];
  const auto &b = built.problem.nodes[static_cast<size_t>(r)];
  if (a.size() != b.size())
    return false;
  for (size_t o = 0; o < a.size(); ++o)
    if (a[o].name != b[o].name)
      return false;
  return true;
}

} // namespace

std::vector<int> representatives(const ir::Graph &graph, const Built &built,
                                 const RepeatedBlocks &blocks) {
  if (blocks.paths.size() < 2)
    return {};
  return representatives(built, instanceRanges(graph, blocks));
}

std::vector<int> representatives(const Built &built,
                                 const std::vector<std::pair<size_t, size_t>> &ranges) {
  if (ranges.size() < 2)
    return {};
  const size_t decisions = built.problem.nodes.size();
  std::vector<int> rep(decisions);
  std::vector<std::vector<size_t>> members(decisions); // op indices, ascending
  for (size_t k = 0; k < built.decisionOf.size(); ++k)
    members[static_cast<size_t>(built.decisionOf[k])].push_back(k);
  for (size_t d = 0; d < decisions; ++d) {
    rep[d] = static_cast<int>(d);
    if (members[d].empty())
      continue;
    size_t k = members[d].front();
    for (size_t i = 1; i < ranges.size(); ++i) {
      if (k < ranges[i].first || k >= ranges[i].second)
        continue;
      size_t shift = ranges[i].first - ranges[0].first;
      int r = built.decisionOf[k - shift];
      if (!sameOptions(built, static_cast<int>(d), r))
        return {};
      // Every member op must mean by each option what its mirror in the
      // first instance means.
      for (size_t q : members[d]) {
        if (q < shift || built.decisionOf[q - shift] != r ||
            built.optionOf[q] != built.optionOf[q - shift] ||
            built.options[q].size() != built.options[q - shift].size())
          return {};
        for (size_t o = 0; o < built.options[q].size(); ++o)
          if (built.options[q][o].ident != built.options[q - shift][o].ident)
            return {};
      }
      rep[d] = r;
    }
  }
  return rep;
}

} // namespace nnsc::autodist
