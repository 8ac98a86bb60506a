#pragma once
/// The rule behind OpRegistry::addFixed: the same annotations for every node.
/// annotateGraph recognises it (std::function::target) to treat a mismatch
/// with the shapes as the user's error rather than an internal one.

#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"

namespace nnsc::ops {

struct FixedAnnotations {
  std::vector<std::string> annotations;

  std::vector<std::string> operator()(const ir::Graph &, const ir::Node &) const {
    return annotations;
  }
};

} // namespace nnsc::ops
