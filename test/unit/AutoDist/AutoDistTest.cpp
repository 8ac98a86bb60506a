#include "../CatchCompat.h"

#include "../../../lib/AutoDist/Problem.h"
#include "../Plan/HandGraphs.h"
#include "nnsc/AutoDist/AutoDist.h"
#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/Plan.h"

using namespace nnsc;

namespace {

cost::Cluster h100() {
  auto c = cost::loadCluster(std::string(NNSC_SOURCE_DIR) + "/configs/clusters/h100-sxm.yaml");
  REQUIRE(c.isOk());
  return *c;
}

// Index of graph node `op` (the k-th of that op).
size_t nodeIndex(const ir::Graph &g, const std::string &op, int k = 0) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].op == op && k-- == 0)
      return i;
  FAIL("no node " << op);
  return 0;
}

int optionNamed(const autodist::Built &b, size_t node, const std::string &ident) {
  for (size_t o = 0; o < b.options[node].size(); ++o)
    if (b.options[node][o].ident == ident)
      return static_cast<int>(o);
  return -1;
}

} // namespace

TEST_CASE("autodist prices each op's options and merges followers into their producer",
          "[autodist]") {
  ir::Graph g = testgraphs::mlp();
  cost::Cluster cluster = h100();
  autodist::Options options;
  autodist::Setting s;
  s.planNgpus = 2;
  autodist::RelayoutCache cache(cluster);
  autodist::Built b = autodist::buildProblem(g, cluster, options, s, cache);

  size_t fc1 = nodeIndex(g, "aten::linear", 0), gelu = nodeIndex(g, "aten::gelu");
  size_t fc2 = nodeIndex(g, "aten::linear", 1), loss = nodeIndex(g, "aten::sum");
  // fc1: replicate, or a cut along the batch (*0), n (column) or k (row).
  REQUIRE(b.options[fc1].size() == 4);
  CHECK(b.options[fc1][0].ident.empty());
  REQUIRE(optionNamed(b, fc1, "n") > 0);
  REQUIRE(optionNamed(b, fc1, "k") > 0);
  // gelu reads only fc1, but fc1's row cut writes partial sums, which no
  // option of gelu reads: gelu is a decision of its own.
  CHECK(b.decisionOf[gelu] != b.decisionOf[fc1]);
  CHECK(b.decisionOf[fc2] != b.decisionOf[gelu]); // fc2 has a weight: its own choice
  CHECK(b.decisionOf[loss] != b.decisionOf[fc2]); // the value-split output of fc2 k
  CHECK(b.problem.nodes.size() == 4);
  CHECK(b.decisions == 4);

  // The column cut halves fc1's time and its weight's memory.
  int rep = 0, col = optionNamed(b, fc1, "n");
  const auto &o = b.problem.nodes[static_cast<size_t>(b.decisionOf[fc1])];
  CHECK(o[static_cast<size_t>(col)].memory < o[static_cast<size_t>(rep)].memory);
  // Re-layouts: fc1's column cut feeds a row-cut fc2 (through gelu) with no
  // forward communication, and a replicated fc2 only through an all-gather.
  const search::Edge *e = nullptr;
  for (const search::Edge &x : b.problem.edges)
    if (x.from == b.decisionOf[gelu] && x.to == b.decisionOf[fc2])
      e = &x;
  REQUIRE(e != nullptr);
  size_t toWidth = b.problem.nodes[static_cast<size_t>(e->to)].size();
  int geluCol = -1;
  for (size_t q = 0; q < b.options[gelu].size(); ++q)
    if (b.options[gelu][q].effect.inputDims[0] == 1)
      geluCol = static_cast<int>(q);
  REQUIRE(geluCol >= 0);
  int fc2Row = optionNamed(b, fc2, "k"), fc2Rep = 0;
  double rowCost = e->at(geluCol, fc2Row, static_cast<int>(toWidth));
  double repCost = e->at(geluCol, fc2Rep, static_cast<int>(toWidth));
  CHECK(rowCost == 0.0); // no gradient flows into gelu's input from x: forward only
  CHECK(repCost > 0.0);
  CHECK(cache.searches() > 0);
}

TEST_CASE("autodist stays within the memory limit and finds Megatron's MLP when weights must be "
          "cut",
          "[autodist]") {
  ir::Graph g = testgraphs::mlp();
  cost::Cluster cluster = h100();
  autodist::Options options;
  options.runtimeNgpus = 2;
  options.planNgpus = 2;
  options.recompute = autodist::Options::Recompute::None;
  // Every weight whole on both devices: params 4 KiB, grads 4 KiB, AdamW 8 KiB
  // per device, plus activations; a limit under that forces the weights cut.
  auto whole = autodist::search(g, cluster, options);
  REQUIRE(whole.isOk());
  double wholeMemory = whole->trials[static_cast<size_t>(whole->chosen)].memoryBytes;
  options.memLimit = 12 * 1024;
  auto cut = autodist::search(g, cluster, options);
  REQUIRE(cut.isOk());
  const autodist::Trial &t = cut->trials[static_cast<size_t>(cut->chosen)];
  CHECK(t.fits);
  CHECK(t.memoryBytes <= options.memLimit);
  CHECK(t.memoryBytes < wholeMemory);
  // The plan itself: exact memory from Plan/Memory.h agrees with the report.
  proto::Plan plan = cut->plan;
  plan.set_format_version(plan::kPlanFormatVersion);
  cost::MemoryOptions m;
  double peak = 0;
  for (const auto &d : plan::estimateMemory(g, plan, m))
    peak = std::max(peak, d.total());
  CHECK(peak == Approx(t.memoryBytes));
  // Megatron's pair: fc1 cut along n (column), fc2 along k (row).
  CHECK(plan.nodes(0).ident() == "n");
  CHECK(plan.nodes(2).ident() == "k");

  options.memLimit = 1024;
  auto none = autodist::search(g, cluster, options);
  REQUIRE(!none.isOk());
  CHECK_THAT(none.status().message(),
             Catch::Matchers::ContainsSubstring("autodist found no plan within the memory limit "
                                                "of 1.0 KiB per device on 2 devices"));
}

TEST_CASE("an op that can only follow its producer joins the producer's decision", "[autodist]") {
  testgraphs::Builder gb;
  int64_t x = gb.input("x", {8, 16});
  int64_t w = gb.param("fc.weight", {32, 16});
  int64_t h = gb.op("aten::linear", {x, w}, {8, 32}, testgraphs::kLinear, "fc");
  int64_t a = gb.op("aten::gelu", {h}, {8, 32}, "a b -> a b", "act");
  int64_t t = gb.op("aten::tanh", {a}, {8, 32}, "a b -> a b", "act2");
  int64_t l = gb.op("aten::sum", {t}, {1}, "a+ b+ -> 1", "loss");
  gb.loss(l);
  cost::Cluster cluster = h100();
  autodist::Setting s;
  s.planNgpus = 2;
  autodist::RelayoutCache cache(cluster);
  autodist::Built b = autodist::buildProblem(gb.graph, cluster, {}, s, cache);
  // tanh reads only gelu, and reads every layout gelu writes: it follows,
  // under each of gelu's options the one cutting the same dim.
  REQUIRE(b.decisionOf[2] == b.decisionOf[1]);
  for (size_t g = 0; g < b.optionOf[1].size(); ++g) {
    const auto &geluOpt = b.options[1][static_cast<size_t>(b.optionOf[1][g])];
    const auto &tanhOpt = b.options[2][static_cast<size_t>(b.optionOf[2][g])];
    CHECK(geluOpt.effect.outputDims == tanhOpt.effect.inputDims);
  }
  // The loss follows too (its `a+ b+` cuts read what tanh writes); gelu
  // does not follow the linear, whose row cut writes partial sums.
  CHECK(b.decisionOf[3] == b.decisionOf[1]);
  CHECK(b.decisionOf[1] != b.decisionOf[0]);
  CHECK(b.ops == 4);
  CHECK(b.problem.nodes.size() == 2);
}

TEST_CASE("a tensor a recompute group keeps is charged to the op that reads it there, at the "
          "size it reads",
          "[autodist]") {
  // fc writes h; the group {add, tanh} recomputes from h, so h is what the
  // group keeps, as add reads it: whole when add is whole, half of it when
  // add is cut (the runtime keeps the group's input after any re-layout).
  // fc's options differ by x's half only (fc saves x for its weight's
  // gradient): h is not fc's to keep, and add counts it once though it
  // reads it twice.
  testgraphs::Builder gb;
  int64_t x = gb.input("x", {8, 16});
  int64_t w = gb.param("fc.weight", {32, 16});
  int64_t h = gb.op("aten::linear", {x, w}, {8, 32}, testgraphs::kLinear, "fc");
  int64_t a = gb.op("aten::add", {h, h}, {8, 32}, "a b, a b -> a b", "blk");
  int64_t t = gb.op("aten::tanh", {a}, {8, 32}, "a b -> a b", "blk");
  int64_t l = gb.op("aten::sum", {t}, {1}, "a+ b+ -> 1", "loss");
  gb.loss(l);
  cost::Cluster cluster = h100();
  autodist::Setting s;
  s.planNgpus = 2;
  s.recomputeGroup = {-1, 0, 0, -1};
  autodist::RelayoutCache cache(cluster);
  autodist::Built b = autodist::buildProblem(gb.graph, cluster, {}, s, cache);
  const double hBytes = 8 * 32 * 4, xBytes = 8 * 16 * 4;
  const auto &fc = b.problem.nodes[static_cast<size_t>(b.decisionOf[0])];
  int whole = optionNamed(b, 0, ""), batch = optionNamed(b, 0, "*0");
  REQUIRE(whole >= 0);
  REQUIRE(batch >= 0);
  CHECK(fc[static_cast<size_t>(whole)].memory - fc[static_cast<size_t>(batch)].memory ==
        Approx(xBytes / 2));
  REQUIRE(b.decisionOf[1] != b.decisionOf[0]);
  const auto &add = b.problem.nodes[static_cast<size_t>(b.decisionOf[1])];
  int addWhole = optionNamed(b, 1, ""), addCut = optionNamed(b, 1, "a");
  REQUIRE(addWhole >= 0);
  REQUIRE(addCut >= 0);
  // The decision's option under which add takes its option `o`.
  auto under = [&](int o) {
    for (size_t d = 0; d < b.optionOf[1].size(); ++d)
      if (b.optionOf[1][d] == o)
        return add[d].memory;
    FAIL("no decision option takes add's option " << o);
    return 0.0;
  };
  CHECK(under(addWhole) == Approx(hBytes));
  CHECK(under(addCut) == Approx(hBytes / 2));
}

TEST_CASE("under ZeRO-3 a weight that one recompute group alone reads keeps 1/dp of its value "
          "and pays two gathers a micro-batch",
          "[autodist]") {
  // w1 is read inside group 0 only; w2 by an op outside any group. Over 4
  // copies (AdamW, fp32), ZeRO-2 keeps each whole value (4 bytes an
  // element), a quarter of its gradient (1) and optimizer state (2);
  // ZeRO-3 keeps a quarter of w1's value too, and w1 pays two all-gathers
  // of its whole bytes per micro-batch; w2's options do not change.
  testgraphs::Builder gb;
  int64_t x = gb.input("x", {8, 16});
  int64_t w1 = gb.param("blk.fc.weight", {16, 16});
  int64_t w2 = gb.param("head.weight", {16, 16});
  int64_t h = gb.op("aten::linear", {x, w1}, {8, 16}, testgraphs::kLinear, "blk.fc");
  int64_t t = gb.op("aten::tanh", {h}, {8, 16}, "a b -> a b", "blk");
  int64_t o = gb.op("aten::linear", {t, w2}, {8, 16}, testgraphs::kLinear, "head");
  int64_t l = gb.op("aten::sum", {o}, {1}, "a+ b+ -> 1", "loss");
  gb.loss(l);
  cost::Cluster cluster = h100();
  autodist::Options options;
  options.runtimeNgpus = 4;
  options.microBatches = 2;
  autodist::Setting s;
  s.planNgpus = 1;
  s.dp = 4;
  s.recomputeGroup = {0, 0, -1, -1};
  autodist::RelayoutCache cache(cluster);
  s.zero = 2;
  autodist::Built two = autodist::buildProblem(gb.graph, cluster, options, s, cache);
  s.zero = 3;
  autodist::Built three = autodist::buildProblem(gb.graph, cluster, options, s, cache);
  auto only = [](const autodist::Built &b, size_t node) {
    const auto &opts = b.problem.nodes[static_cast<size_t>(b.decisionOf[node])];
    REQUIRE(opts.size() == 1); // one copy of one device: every op whole
    return opts[0];
  };
  const double elements = 16 * 16;
  search::Option fc2 = only(two, 0), fc3 = only(three, 0);
  CHECK(fc2.memory - fc3.memory == Approx(elements * 4 * 3 / 4));
  auto gather = cluster.commTime(cost::Collective::AllGather, 25 << 20, {0, 1, 2, 3});
  REQUIRE(gather);
  const double perByte = *gather / (25 << 20);
  CHECK(fc3.time - fc2.time == Approx(2 * 2 * elements * 4 * perByte));
  CHECK(fc3.time > fc2.time);
  search::Option head2 = only(two, 2), head3 = only(three, 2);
  CHECK(head3.memory == Approx(head2.memory));
  CHECK(head3.time == Approx(head2.time));
}
