// The plan search as an integer linear program solved by CBC (Solver.h
// solveIlp): the dynamic program's cross-check.
//
// Variables: x[n][o] in {0, 1}, node n takes option o; for every edge e from
// n to m and option pair (a, b), y[e][a][b] in [0, 1]. Rows: each node takes
// one option (sum_o x[n][o] = 1); each edge's pairs agree with both ends
// (sum_b y[e][a][b] = x[n][a], sum_a y[e][a][b] = x[m][b]: once the x are
// integral exactly one pair is 1, so the y need not be integers); memory
// (sum mem * x <= limit). Objective: option times plus pair costs. Times are
// given to CBC in microseconds and memory in thousandths of the limit, so
// that its absolute tolerances (1e-7 and so) sit far below anything that
// matters.
#include "nnsc/Search/Solver.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#ifdef NNSC_HAVE_CBC
#include <coin/Cbc_C_Interface.h>
#endif

namespace nnsc::search {

bool ilpAvailable() {
#ifdef NNSC_HAVE_CBC
  return true;
#else
  return false;
#endif
}

#ifndef NNSC_HAVE_CBC

Expected<Solution> solveIlp(const Problem &, const IlpLimits &) {
  return Status::error("error: this build has no ILP solver: CBC (coinor-libcbc-dev) was not "
                       "found when it was configured");
}

#else

namespace {

constexpr double kTimeScale = 1e6; // seconds -> microseconds

struct CbcModel {
  Cbc_Model *m = Cbc_newModel();
  ~CbcModel() { Cbc_deleteModel(m); }
};

} // namespace

Expected<Solution> solveIlp(const Problem &p, const IlpLimits &limits) {
  NNSC_RETURN_IF_ERROR(validateProblem(p));
  CbcModel model;
  Cbc_setLogLevel(model.m, 0);
  if (limits.maxSeconds > 0)
    Cbc_setMaximumSeconds(model.m, limits.maxSeconds);
  Cbc_setAllowableGap(model.m, 0);
  Cbc_setAllowableFractionGap(model.m, 0);

  // Columns: every x, then every edge's y.
  std::vector<int> firstX(p.nodes.size());
  int cols = 0;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    firstX[n] = cols;
    for (const Option &o : p.nodes[n]) {
      Cbc_addCol(model.m, "", 0, 1, o.time * kTimeScale, 1, 0, nullptr, nullptr);
      ++cols;
    }
  }
  std::vector<int> firstY(p.edges.size());
  for (size_t e = 0; e < p.edges.size(); ++e) {
    firstY[e] = cols;
    for (double c : p.edges[e].cost) {
      Cbc_addCol(model.m, "", 0, 1, c * kTimeScale, 0, 0, nullptr, nullptr);
      ++cols;
    }
  }
  // One option per node.
  std::vector<int> idx;
  std::vector<double> coef;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    idx.clear();
    coef.clear();
    for (size_t o = 0; o < p.nodes[n].size(); ++o) {
      idx.push_back(firstX[n] + static_cast<int>(o));
      coef.push_back(1);
    }
    Cbc_addRow(model.m, "", static_cast<int>(idx.size()), idx.data(), coef.data(), 'E', 1);
  }
  // Each edge's pairs agree with both ends' options: the pairs in row a sum
  // to x[from][a], those in column b to x[to][b].
  for (size_t e = 0; e < p.edges.size(); ++e) {
    const Edge &edge = p.edges[e];
    int na = static_cast<int>(p.nodes[static_cast<size_t>(edge.from)].size());
    int nb = static_cast<int>(p.nodes[static_cast<size_t>(edge.to)].size());
    auto agree = [&](int x, int first, int count, int stride) {
      idx.assign({x});
      coef.assign({-1});
      for (int k = 0; k < count; ++k) {
        idx.push_back(first + k * stride);
        coef.push_back(1);
      }
      Cbc_addRow(model.m, "", static_cast<int>(idx.size()), idx.data(), coef.data(), 'E', 0);
    };
    for (int a = 0; a < na; ++a)
      agree(firstX[static_cast<size_t>(edge.from)] + a, firstY[e] + a * nb, nb, 1);
    for (int b = 0; b < nb; ++b)
      agree(firstX[static_cast<size_t>(edge.to)] + b, firstY[e] + b, na, nb);
  }
  // Memory.
  if (std::isfinite(p.memoryLimit)) {
    double scale = 1e3 / std::max(std::abs(p.memoryLimit), 1e-300);
    idx.clear();
    coef.clear();
    for (size_t n = 0; n < p.nodes.size(); ++n)
      for (size_t o = 0; o < p.nodes[n].size(); ++o)
        if (p.nodes[n][o].memory != 0) {
          idx.push_back(firstX[n] + static_cast<int>(o));
          coef.push_back(p.nodes[n][o].memory * scale);
        }
    Cbc_addRow(model.m, "", static_cast<int>(idx.size()), idx.data(), coef.data(), 'L',
               p.memoryLimit * scale);
  }

  Cbc_solve(model.m);
  if (Cbc_isProvenInfeasible(model.m))
    return noPlanFits(p);
  if (!Cbc_isProvenOptimal(model.m))
    return errorf("error: CBC stopped without a proven optimum (status {}, secondary {}; limit "
                  "{} s)",
                  Cbc_status(model.m), Cbc_secondaryStatus(model.m), limits.maxSeconds);
  const double *x = Cbc_getColSolution(model.m);
  std::vector<int> choice(p.nodes.size());
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    int best = 0;
    for (size_t o = 1; o < p.nodes[n].size(); ++o)
      if (x[firstX[n] + static_cast<int>(o)] > x[firstX[n] + best])
        best = static_cast<int>(o);
    choice[n] = best;
  }
  Solution s = evaluate(p, choice);
  if (s.memory > p.memoryLimit * (1 + 1e-12))
    return errorf("error: CBC's solution needs {} bytes, over the limit of {}", s.memory,
                  p.memoryLimit);
  return s;
}

#endif

} // namespace nnsc::search
