#pragma once
// The model's repeated blocks (private to nnsc_autodist): which module class
// repeats (transformer layers), and which decisions of a built problem copy
// the first instance's, so the solver folds them (Search/Repeated.h).
#include <string>
#include <utility>
#include <vector>

#include "Problem.h"

namespace nnsc::autodist {

/// The module class with the most nodes among those with two or more
/// instances, and its instances in node order.
struct RepeatedBlocks {
  std::string cls;
  std::vector<std::string> paths;
};

RepeatedBlocks repeatedBlocks(const ir::Graph &graph);

/// Each instance's node range [begin, end), in order, when the instances
/// are contiguous, equally long and alike op by op (op, output shapes, the
/// kind and shape of every input); else empty.
std::vector<std::pair<size_t, size_t>> instanceRanges(const ir::Graph &graph,
                                                      const RepeatedBlocks &blocks);

/// Per decision of `built`: itself, or the decision of the first instance
/// it copies (Search/Repeated.h). Empty when the instances are not copies
/// of each other: not contiguous, other ops or shapes, other options (a
/// recomputed layer beside one that is not is still a copy: only the
/// prices differ, and the fold sums prices).
std::vector<int> representatives(const ir::Graph &graph, const Built &built,
                                 const RepeatedBlocks &blocks);
/// The same, with the instances' ranges found already (instanceRanges).
std::vector<int> representatives(const Built &built,
                                 const std::vector<std::pair<size_t, size_t>> &ranges);

} // namespace nnsc::autodist
