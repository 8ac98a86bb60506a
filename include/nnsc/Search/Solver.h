#pragma once
/// Exact solvers of a search::Problem.
///
/// solveDp: a dynamic program over the operator order, nnScaler's
/// formulation with memory as a dimension. Its state after node i is the
/// options of the "frontier" (nodes <= i with an edge to a node > i), and
/// for every state it keeps the Pareto set of (memory, time) over the
/// choices so far, so the memory limit is exact, not bucketed. The work
/// grows with the product of the frontier's option counts (small for the
/// chains and residual streams of transformer layers once followers are
/// merged) times the Pareto sets' sizes.
///
/// solveBruteForce: every assignment, for cross-checks on small problems.
///
/// solveIlp: the problem as an integer linear program for CBC.

#include "nnsc/Search/Problem.h"
#include "nnsc/Support/Status.h"

namespace nnsc::search {

/// `x` rounded to 40 significant bits: the form in which the solvers
/// compare totals. Sums of the same prices added in another order (a fold's,
/// a probe's weighted ones) differ in their last bits; rounded they tie, and
/// a tie goes to the earlier candidate (option order), the same either way.
double canonical(double x);

struct DpLimits {
  /// Largest number of frontier states the program may hold at once; a
  /// problem wider than this is an error naming the node, not a hang.
  int64_t maxStates = 1 << 20;
  /// Largest Pareto set kept per state; past it the set is thinned to this
  /// many points evenly spread over memory (no longer exact: reported).
  int64_t maxParetoPoints = 4096;
};

/// The minimum-time assignment within the memory limit. Errors: a malformed
/// problem (an edge's node out of range or backwards, a cost table of the
/// wrong size, a node without options), a frontier past maxStates, or no
/// assignment within the limit ("no plan fits in X: the least memory any
/// assignment needs is Y").
Expected<Solution> solveDp(const Problem &p, const DpLimits &limits = {});

/// The same by enumeration; refuses problems of more than `maxAssignments`.
Expected<Solution> solveBruteForce(const Problem &p, int64_t maxAssignments = 1 << 22);

struct IlpLimits {
  double maxSeconds = 60; ///< CBC's time limit; past it an error, not a guess
};

/// The same problem as an integer linear program solved by CBC (COIN-OR's
/// branch and cut; Debian's coinor-libcbc-dev, the solver Alpa and PyTorch's
/// autoparallel use): a binary per option, one option per node, a
/// continuous variable per option pair of every edge tied to both ends'
/// choices, memory as one row (Ilp.cpp). The dynamic program's cross-check.
/// Errors: those of validateProblem, no assignment within the limit, CBC
/// stopping without a proven optimum, a build without CBC.
Expected<Solution> solveIlp(const Problem &p, const IlpLimits &limits = {});

/// Whether this build has CBC (solveIlp otherwise always errs).
bool ilpAvailable();

/// The error every solver returns when no assignment fits the limit: the
/// least memory any assignment needs and the node with the largest need.
Status noPlanFits(const Problem &p);

/// Checks the problem's shape (the errors solveDp lists first).
Status validateProblem(const Problem &p);

} // namespace nnsc::search
