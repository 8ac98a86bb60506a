#pragma once
/// Solving a problem whose middle repeats (transformer layers) once, not
/// once per repeat: every repeat takes the same options as its
/// representative, so the solver sees the representative's decisions only
/// and the search time does not grow with depth.
///
/// `representative[d]` is d for a decision solved for itself and, for a
/// decision of a later repeat, the decision of the first repeat it copies
/// (same number of options, the same meaning by index). The folded problem
/// keeps the decisions that represent themselves, in order; each option's
/// time and memory and each edge's cost are summed over the repeats, so a
/// uniform assignment costs the same folded as unfolded. An edge that folds
/// backwards (a repeat's output read by the next repeat: the residual
/// stream) is handled by fixing its source's options in turn and charging
/// the edge to its target; the best over those fixings wins.
///
/// The result is the best uniform assignment (exact, up to the DP's Pareto
/// thinning), expanded to every decision of `p`.
#include <vector>

#include "nnsc/Search/Solver.h"

namespace nnsc::search {

struct RepeatLimits {
  /// Most assignments of the backward edges' sources tried; past it the
  /// fold is refused (an error) and the caller solves `p` whole.
  int64_t maxFixings = 256;
};

/// The least memory any assignment that folds by `representative` needs:
/// per kept decision, its option whose memory summed over its repeats is
/// smallest (at least leastMemory(p)). Errors: as solveRepeated's
/// representatives.
Expected<double> leastMemoryRepeated(const Problem &p, const std::vector<int> &representative);

/// Errors: a representative that is not earlier or itself, or differs in
/// option count; too many fixings; and every error of solveDp (the last
/// fixing's, when none fits).
Expected<Solution> solveRepeated(const Problem &p, const std::vector<int> &representative,
                                 const DpLimits &limits = {}, const RepeatLimits &repeat = {});

} // namespace nnsc::search
