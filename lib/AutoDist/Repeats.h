#pragma once
// The model's repeated blocks (private to nnsc_autodist): which module class
// repeats (transformer layers), and which decisions of a built problem copy
// the first instance's, so the solver folds them (Search/Repeated.h).
#include <string>
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

/// Per decision of `built`: itself, or the decision of the first instance
/// it copies (Search/Repeated.h). Empty when the instances are not copies
/// of each other: not contiguous, other ops or shapes, other options (a
/// recomputed layer beside one that is not is still a copy: only the
/// prices differ, and the fold sums prices).
std::vector<int> representatives(const ir::Graph &graph, const Built &built,
                                 const RepeatedBlocks &blocks);

} // namespace nnsc::autodist
