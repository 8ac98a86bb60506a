// Folding repeated decisions (Search/Repeated.h) against brute force over
// the uniform assignments of random periodic problems.
#include "../CatchCompat.h"

#include <random>

#include "nnsc/Search/Repeated.h"

using namespace nnsc::search;

namespace {

// prefix (2 decisions), `repeats` x a block of 3, suffix (1): every block
// priced alike; edges inside a block, from the prefix into every block, a
// block's last decision into the next block's first two (the residual
// stream, folding backwards), and the last block into the suffix.
struct Periodic {
  Problem p;
  std::vector<int> rep;
};

Periodic periodic(std::mt19937 &rng, int repeats) {
  std::uniform_int_distribution<int> width(1, 3);
  std::uniform_real_distribution<double> cost(0, 10), mem(0, 5);
  auto options = [&](int n) {
    std::vector<Option> os;
    for (int k = 0; k < n; ++k)
      os.push_back({cost(rng), mem(rng), ""});
    return os;
  };
  auto table = [&](size_t a, size_t b) {
    std::vector<double> t(a * b);
    for (double &x : t)
      x = cost(rng);
    return t;
  };
  Periodic out;
  Problem &p = out.p;
  p.nodes = {options(width(rng)), options(width(rng))};
  std::vector<std::vector<Option>> block = {options(width(rng)), options(width(rng)),
                                            options(width(rng))};
  for (int r = 0; r < repeats; ++r)
    for (const auto &b : block)
      p.nodes.push_back(b);
  p.nodes.push_back(options(width(rng)));
  auto w = [&](int node) { return p.nodes[static_cast<size_t>(node)].size(); };
  auto inside = table(w(2), w(3)), inside2 = table(w(3), w(4)), skip = table(w(2), w(4));
  auto fromPrefix = table(w(0), w(3)), residual = table(w(4), w(2)), residual2 = table(w(4), w(3));
  for (int r = 0; r < repeats; ++r) {
    int b = 2 + 3 * r;
    p.edges.push_back({b, b + 1, inside});
    p.edges.push_back({b, b + 2, skip});
    p.edges.push_back({b + 1, b + 2, inside2});
    p.edges.push_back({0, b + 1, fromPrefix});
    if (r + 1 < repeats) {
      p.edges.push_back({b + 2, b + 3, residual});
      p.edges.push_back({b + 2, b + 4, residual2});
    }
  }
  p.edges.push_back({1, 2, table(w(1), w(2))});
  int last = 2 + 3 * repeats;
  p.edges.push_back({last - 1, last, table(w(last - 1), w(last))});
  std::sort(p.edges.begin(), p.edges.end(),
            [](const Edge &a, const Edge &b) { return std::tie(a.to, a.from) < std::tie(b.to, b.from); });
  for (int d = 0; d < static_cast<int>(p.nodes.size()); ++d)
    out.rep.push_back(d >= 5 && d < last ? 2 + (d - 2) % 3 : d);
  return out;
}

// The best assignment whose repeats copy their representatives.
std::optional<Solution> bestUniform(const Problem &p, const std::vector<int> &rep) {
  std::optional<Solution> best;
  std::vector<int> choice(p.nodes.size(), 0);
  while (true) {
    bool uniform = true;
    for (size_t d = 0; d < rep.size(); ++d)
      uniform = uniform && choice[d] == choice[static_cast<size_t>(rep[d])];
    if (uniform) {
      Solution s = evaluate(p, choice);
      if (s.memory <= p.memoryLimit && (!best || s.time < best->time))
        best = s;
    }
    size_t i = 0;
    while (i < choice.size() && ++choice[i] == static_cast<int>(p.nodes[i].size()))
      choice[i++] = 0;
    if (i == choice.size())
      return best;
  }
}

} // namespace

TEST_CASE("solveRepeated finds the best uniform assignment of random periodic problems",
          "[search][repeated]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    Periodic pr = periodic(rng, 2 + trial % 3);
    if (trial % 2 == 1) { // half of them under a memory limit
      double total = 0;
      for (const auto &os : pr.p.nodes)
        total += os.front().memory;
      pr.p.memoryLimit = total * 0.9;
    }
    auto expected = bestUniform(pr.p, pr.rep);
    auto got = solveRepeated(pr.p, pr.rep);
    INFO("trial " << trial);
    REQUIRE(got.isOk() == expected.has_value());
    if (!expected)
      continue;
    CHECK(got->time == Approx(expected->time).epsilon(1e-9));
    CHECK(got->memory <= pr.p.memoryLimit);
    for (size_t d = 0; d < pr.rep.size(); ++d)
      CHECK(got->choice[d] == got->choice[static_cast<size_t>(pr.rep[d])]);
    CHECK(evaluate(pr.p, got->choice).time == Approx(got->time).epsilon(1e-12));
  }
}

TEST_CASE("solveRepeated refuses representatives that do not match", "[search][repeated]") {
  Problem p;
  p.nodes = {{{1, 1, "R"}, {2, 1, "S"}}, {{1, 1, "R"}}};
  auto bad = solveRepeated(p, {0, 0});
  REQUIRE_FALSE(bad.isOk());
  CHECK(bad.status().message() == "error: decision 1 cannot be represented by decision 0");
  auto later = solveRepeated(p, {1, 1});
  REQUIRE_FALSE(later.isOk());
}

TEST_CASE("leastMemoryRepeated is the least memory of the uniform assignments",
          "[search][repeated]") {
  // Two repeats of one decision with two options, and one decision of its
  // own: memories (4, 1) and (1, 4) sum to (5, 5) folded, so the uniform
  // least is 5 + 2, where any assignment needs only 1 + 1 + 2.
  Problem p;
  p.nodes = {{{0, 4, "a"}, {0, 1, "b"}}, {{0, 1, "a"}, {0, 4, "b"}}, {{0, 2, "x"}, {0, 3, "y"}}};
  REQUIRE(leastMemory(p) == 4.0);
  auto folded = leastMemoryRepeated(p, {0, 0, 2});
  REQUIRE(folded.isOk());
  REQUIRE(*folded == 7.0);
  // Brute force over the uniform assignments agrees on random periodic ones:
  // priced by their memory alone, the fastest uniform one is the least.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    Periodic q = periodic(rng, 2 + trial % 4);
    auto least = leastMemoryRepeated(q.p, q.rep);
    REQUIRE(least.isOk());
    Problem byMemory = q.p;
    for (auto &options : byMemory.nodes)
      for (Option &o : options)
        o.time = o.memory;
    for (Edge &e : byMemory.edges)
      std::fill(e.cost.begin(), e.cost.end(), 0.0);
    auto best = bestUniform(byMemory, q.rep);
    REQUIRE(best.has_value());
    INFO("trial " << trial);
    REQUIRE(*least == Approx(best->time).epsilon(1e-12));
    REQUIRE(*least >= leastMemory(q.p) - 1e-9);
  }
  REQUIRE(!leastMemoryRepeated(p, {0, 1}).isOk());
}
