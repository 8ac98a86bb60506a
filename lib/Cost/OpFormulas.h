#pragma once
// Op cost formulas shared by OpCost.cpp (generic classes) and
// OpFormulas.cpp (ops with a formula of their own).

#include <optional>

#include "OpTable.h"
#include "nnsc/Cost/OpCost.h"

namespace nnsc::cost::formulas {

double sumBytes(const std::vector<TensorInfo> &ts);
bool anyNeedsGrad(const OpShapes &p);
/// Bytes of the gradients of inputs that need one.
double gradInputBytes(const OpShapes &p);
int gradInputs(const OpShapes &p);
/// The largest output's element count.
double outNumel(const OpShapes &p);
Saved savedByRule(const OpShapes &p, SaveRule rule);
double savedBytes(const OpShapes &p, const Saved &s);

/// Sets the vector kind, elements and rows of `c`'s forward and backward
/// (Work::vectorKind): elements the largest of the op's tensors, rows those
/// of the row-wise kinds (softmax, norm, loss).
void tagVector(OpCost &c, const OpShapes &p, const char *kind);

/// The cost by the op's class and table row.
OpCost byClass(const OpShapes &p, const OpTraits &t);
/// The cost of an op with a formula of its own, or nullopt.
std::optional<OpCost> special(const OpShapes &p, const OpTraits &t);

} // namespace nnsc::cost::formulas
