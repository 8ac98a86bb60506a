#pragma once
/// The plan search as plain numbers (autodist's solver input): operators in
/// a topological order, each with its options (replicate, or a split along
/// one of its annotation's identifiers) priced as time and memory, and the
/// re-layout cost between the options of a producer and of a consumer. No IR,
/// no cost model: whoever builds the problem prices it (XLA's auto-sharding
/// split: strategies and costs above, the solver below).
///
/// The objective is the sum of the chosen options' times and of the edges'
/// costs under the chosen pairs; the constraint, the sum of the chosen
/// options' memories against the limit.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace nnsc::search {

/// One way to run an operator.
struct Option {
  double time = 0;   ///< seconds (or any additive cost)
  double memory = 0; ///< bytes it adds to the device's peak
  std::string name;  ///< for messages and reports, e.g. "split b" or "replicate"
};

/// Re-layout cost between a producer's and a consumer's options.
struct Edge {
  int from = 0;              ///< node index, from < to
  int to = 0;                ///< node index
  std::vector<double> cost;  ///< options(from) x options(to), row-major
  double at(int a, int b, int toOptions) const {
    return cost[static_cast<size_t>(a) * static_cast<size_t>(toOptions) + static_cast<size_t>(b)];
  }
};

struct Problem {
  std::vector<std::vector<Option>> nodes; ///< in topological order; each non-empty
  std::vector<std::string> nodeNames;     ///< optional, for messages
  std::vector<Edge> edges;
  double memoryLimit = std::numeric_limits<double>::infinity();
};

struct Solution {
  std::vector<int> choice; ///< option index per node
  double time = 0;         ///< objective: option times plus edge costs
  double memory = 0;       ///< sum of the chosen options' memories
};

/// Recomputes a solution's time and memory from `p` (for tests and reports).
Solution evaluate(const Problem &p, const std::vector<int> &choice);

/// The least memory any assignment of `p` needs: every node at its smallest
/// option (the bound every solver's "no plan fits" message gives).
double leastMemory(const Problem &p);

} // namespace nnsc::search
