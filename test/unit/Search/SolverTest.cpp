// The plan search's solvers on hand-written problems with known optima, and
// the dynamic program against brute force on random ones.
#include "../CatchCompat.h"

#include <random>

#include "nnsc/Search/Solver.h"

using namespace nnsc::search;

namespace {

Option opt(double time, double memory, const char *name = "") { return {time, memory, name}; }

// A chain of three operators, each replicated (R) or split (S); moving from
// a split producer to a replicated consumer costs an all-gather.
//   node 0: R (t 4, m 4)  S (t 2, m 2)
//   node 1: R (t 4, m 4)  S (t 2, m 2)
//   node 2: R (t 1, m 3)  S (t 3, m 1)
//   0->1: RR 0, RS 0.5, SR 3, SS 0      1->2: RR 0, RS 0.5, SR 1, SS 0
// By hand: S S R = 2+2+1 + 0+1 = 6 (memory 7); S S S = 2+2+3 = 7 (memory 5);
// R R R = 9 (memory 11); every other assignment costs more than 7.
Problem chain() {
  Problem p;
  p.nodes = {{opt(4, 4, "R"), opt(2, 2, "S")},
             {opt(4, 4, "R"), opt(2, 2, "S")},
             {opt(1, 3, "R"), opt(3, 1, "S")}};
  p.nodeNames = {"embed", "mlp", "head"};
  p.edges = {{0, 1, {0, 0.5, 3, 0}}, {1, 2, {0, 0.5, 1, 0}}};
  return p;
}

Problem randomProblem(std::mt19937 &rng) {
  std::uniform_int_distribution<int> nodes(1, 7), options(1, 3), coin(0, 3);
  std::uniform_real_distribution<double> cost(0, 10), mem(0, 5);
  Problem p;
  int n = nodes(rng);
  for (int i = 0; i < n; ++i) {
    std::vector<Option> os;
    for (int k = options(rng); k > 0; --k)
      os.push_back(opt(cost(rng), mem(rng)));
    p.nodes.push_back(os);
  }
  for (int to = 1; to < n; ++to)
    for (int from = 0; from < to; ++from)
      if (from == to - 1 || coin(rng) == 0) { // a chain plus skip edges
        Edge e{from, to, {}};
        for (size_t k = 0; k < p.nodes[size_t(from)].size() * p.nodes[size_t(to)].size(); ++k)
          e.cost.push_back(cost(rng));
        p.edges.push_back(e);
      }
  double total = 0;
  for (const auto &os : p.nodes)
    total += os[0].memory;
  p.memoryLimit = std::uniform_real_distribution<double>(0.5, 1.2)(rng) * total;
  return p;
}

} // namespace

TEST_CASE("search: the fastest plan of a chain, by hand", "[search]") {
  auto s = solveDp(chain());
  REQUIRE(s.isOk());
  CHECK(s->choice == std::vector<int>{1, 1, 0});
  CHECK(s->time == 6);
  CHECK(s->memory == 7);
}

TEST_CASE("search: the memory limit moves the optimum", "[search]") {
  Problem p = chain();
  p.memoryLimit = 6; // S S R needs 7: S S S (7, memory 5) is next best
  auto s = solveDp(p);
  REQUIRE(s.isOk());
  CHECK(s->choice == std::vector<int>{1, 1, 1});
  CHECK(s->time == 7);
  CHECK(s->memory == 5);
  p.memoryLimit = 5; // exactly S S S's memory
  REQUIRE(solveDp(p).isOk());
  CHECK(solveDp(p)->time == 7);
  p.memoryLimit = 4.5;
  auto none = solveDp(p);
  REQUIRE(!none.isOk());
  CHECK(none.status().message() ==
        "error: no plan fits in the memory limit 4.5: the least memory any assignment needs is "
        "5; the largest single need is node 0 (embed)'s 2");
}

TEST_CASE("search: a skip edge keeps its producer's choice alive", "[search]") {
  // A residual: node 0 feeds node 1 and node 2. Splitting node 1 alone is
  // cheapest unless node 0's layout must also suit node 2.
  //   node 0: R (t 1)  S (t 1)      node 1: R (t 5)  S (t 1)     node 2: R (t 1)  S (t 1)
  //   0->1: RR 0, RS 2, SR 2, SS 0   1->2: all 0
  //   0->2: RR 0, RS 10, SR 10, SS 10 (node 2 wants node 0 replicated and replicates)
  // By hand: R R R = 1+5+1 = 7; R S R = 1+1+1+2 = 5; S S R = 3+0+10 = 13: R S R wins.
  Problem p;
  p.nodes = {{opt(1, 0), opt(1, 0)}, {opt(5, 0), opt(1, 0)}, {opt(1, 0), opt(1, 0)}};
  p.edges = {{0, 1, {0, 2, 2, 0}}, {1, 2, {0, 0, 0, 0}}, {0, 2, {0, 10, 10, 10}}};
  auto s = solveDp(p);
  REQUIRE(s.isOk());
  CHECK(s->choice == std::vector<int>{0, 1, 0});
  CHECK(s->time == 5);
}

TEST_CASE("search: the dynamic program equals brute force on random problems", "[search]") {
  std::mt19937 rng(12345);
  int feasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Problem p = randomProblem(rng);
    auto dp = solveDp(p);
    auto bf = solveBruteForce(p);
    REQUIRE(dp.isOk() == bf.isOk());
    if (!dp.isOk()) {
      CHECK(dp.status().message() == bf.status().message());
      continue;
    }
    ++feasible;
    CHECK(dp->time == Catch::Approx(bf->time).epsilon(1e-12));
    CHECK(dp->memory <= p.memoryLimit);
    Solution again = evaluate(p, dp->choice);
    CHECK(again.time == Catch::Approx(dp->time).epsilon(1e-12));
  }
  CHECK(feasible > 100); // the limits are not all impossible
}

TEST_CASE("search: CBC's integer program finds the hand-computed optima", "[search][ilp]") {
  INFO("this build has no CBC: scripts/setup.sh installs coinor-libcbc-dev");
  REQUIRE(ilpAvailable());
  Problem p = chain();
  auto free = solveIlp(p);
  REQUIRE(free.isOk());
  CHECK(free->choice == std::vector<int>{1, 1, 0});
  CHECK(free->time == Catch::Approx(6).epsilon(1e-12));
  p.memoryLimit = 6; // S S R needs 7: S S S (time 7, memory 5) is the best that fits
  auto tight = solveIlp(p);
  REQUIRE(tight.isOk());
  CHECK(tight->choice == std::vector<int>{1, 1, 1});
  CHECK(tight->time == Catch::Approx(7).epsilon(1e-12));
  p.memoryLimit = 4.5;
  auto none = solveIlp(p);
  REQUIRE(!none.isOk());
  CHECK(none.status().message() == solveDp(p).status().message()); // the DP's own words
  CHECK(none.status().message() ==
        "error: no plan fits in the memory limit 4.5: the least memory any assignment needs is "
        "5; the largest single need is node 0 (embed)'s 2");
}

TEST_CASE("search: the dynamic program equals CBC's integer program on random problems",
          "[search][ilp]") {
  INFO("this build has no CBC: scripts/setup.sh installs coinor-libcbc-dev");
  REQUIRE(ilpAvailable());
  std::mt19937 rng(777);
  int feasible = 0;
  for (int trial = 0; trial < 120; ++trial) {
    Problem p = randomProblem(rng);
    auto dp = solveDp(p);
    auto ilp = solveIlp(p);
    REQUIRE(dp.isOk() == ilp.isOk());
    if (!dp.isOk()) {
      CHECK(ilp.status().message() == dp.status().message());
      continue;
    }
    ++feasible;
    // The same optimum (the choices may differ where two assignments tie).
    CHECK(ilp->time == Catch::Approx(dp->time).epsilon(1e-9));
    CHECK(ilp->memory <= p.memoryLimit);
  }
  CHECK(feasible > 40);
}

TEST_CASE("search: malformed problems and a too-wide frontier are errors", "[search]") {
  Problem p = chain();
  p.edges.push_back({2, 1, {0, 0, 0, 0}});
  CHECK(solveDp(p).status().message() ==
        "error: edge 2 goes from node 2 to node 1; edges go forward between nodes 0..2");
  p = chain();
  p.edges[1].cost.pop_back();
  CHECK(solveDp(p).status().message() ==
        "error: edge 1 (1 -> 2) has 3 costs; its nodes' options make 4");
  p = chain();
  p.nodes[1].clear();
  CHECK(solveDp(p).status().message() == "error: node 1 (mlp) has no option");
  // Twelve nodes all feeding a last one: 2^12 states at once.
  Problem wide;
  for (int i = 0; i < 13; ++i)
    wide.nodes.push_back({opt(1, 0), opt(2, 0)});
  for (int i = 0; i < 12; ++i)
    wide.edges.push_back({i, 12, {0, 0, 0, 0}});
  DpLimits limits;
  limits.maxStates = 1000;
  CHECK(solveDp(wide, limits).status().message() ==
        "error: the search is too wide at node 9: 10 nodes live at once with 1.02e+03 option "
        "combinations (limit 1000)");
  CHECK(solveDp(wide).isOk());
}

TEST_CASE("search: totals equal but for their last bits tie, and the earlier option wins",
          "[search]") {
  // 0.1 + 0.2 is 0.30000000000000004: the same price added in another order.
  Problem p;
  p.nodes = {{{0.1, 1, "a"}, {0.0, 1, "b"}}, {{0.2, 1, "x"}, {0.3, 1, "y"}}};
  p.edges = {{0, 1, {0, 10, 10, 0}}}; // a goes with x, b with y
  auto s = solveDp(p);
  REQUIRE(s.isOk());
  CHECK(s->choice == std::vector<int>{0, 0}); // a + x = 0.1 + 0.2 ties b + y = 0.0 + 0.3
  CHECK(canonical(0.1 + 0.2) == canonical(0.3));
  CHECK(canonical(0.3) != canonical(0.3 * (1 + 1e-9)));
  CHECK(canonical(0.0) == 0.0);
  // A real difference still decides.
  p.nodes[0][1].time = -1e-6;
  CHECK(solveDp(p)->choice == std::vector<int>{1, 1});
}
