#include "../CatchCompat.h"

#include "HandGraphs.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"

using namespace nnsc;

namespace {

plan::PlanOptions options(const std::string &policy, int runtime, int planNgpus = 0) {
  plan::PlanOptions o;
  o.policy = policy;
  o.runtimeNgpus = runtime;
  o.planNgpus = planNgpus;
  return o;
}

std::vector<std::string> splits(const proto::Plan &p) {
  std::vector<std::string> out;
  for (const auto &np : p.nodes())
    out.push_back(np.num() > 1 ? np.ident() + "/" + std::to_string(np.num()) : "whole");
  return out;
}

} // namespace

TEST_CASE("tp splits ops with a weight on the weight, others on their first dividing dim",
          "[plan][policy]") {
  ir::Graph g = testgraphs::mlp();
  auto p = plan::makePlan(g, options("tp", 2));
  REQUIRE(p.isOk());
  CHECK(p->plan_ngpus() == 2);
  // linear `* k+, n k+ -> * n`: n (spatial, cuts the weight) before k (a reduction).
  CHECK(splits(*p) == std::vector<std::string>{"n/2", "a/2", "n/2", "a/2"});
  // 3 devices divide nothing but the MLP widths? 8, 16, 32: none; all replicated.
  auto p3 = plan::makePlan(g, options("tp", 3));
  REQUIRE(p3.isOk());
  CHECK(splits(*p3) == std::vector<std::string>{"whole", "whole", "whole", "whole"});
}

TEST_CASE("tp --seed picks among the divisible identifiers, reproducibly", "[plan][policy]") {
  ir::Graph g = testgraphs::mlp();
  std::set<std::string> seenFc1;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    plan::PlanOptions o = options("tp", 4);
    o.seed = seed;
    auto a = plan::makePlan(g, o), b = plan::makePlan(g, o);
    REQUIRE(a.isOk());
    CHECK(splits(*a) == splits(*b));
    seenFc1.insert(a->nodes(0).ident());
  }
  CHECK(seenFc1 == std::set<std::string>{"k", "n"}); // only the weight-cutting identifiers
}

TEST_CASE("data splits the inputs' dim 0 and follows it through the ops", "[plan][policy]") {
  ir::Graph g = testgraphs::mlp();
  auto p = plan::makePlan(g, options("data", 4, 2));
  REQUIRE(p.isOk());
  CHECK(p->plan_ngpus() == 2);
  CHECK(p->runtime_ngpus() == 4);
  REQUIRE(p->inputs_size() == 1);
  CHECK(p->inputs(0).tensor() == 0);
  CHECK(p->inputs(0).dim() == 0);
  CHECK(p->inputs(0).num() == 2);
  CHECK(splits(*p) == std::vector<std::string>{"*0/2", "a/2", "*0/2", "a/2"});

  auto bad = plan::makePlan(g, options("data", 3));
  REQUIRE_FALSE(bad.isOk());
  CHECK(bad.status().message() == "error: policy 'data': the batch dim of input 'x' (dim 0 of "
                                  "[8, 16]) does not split into 3 parts");
}

TEST_CASE("data replicates ops the batch does not reach", "[plan][policy]") {
  testgraphs::Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("w", {8, 8});
  int64_t y = b.op("aten::linear", {x, w}, {4, 8}, testgraphs::kLinear, "fc");
  int64_t t = b.op("aten::t", {w}, {8, 8}, "a b -> b a", "t");
  b.graph.outputs = {y, t};
  auto p = plan::makePlan(b.graph, options("data", 2));
  REQUIRE(p.isOk());
  CHECK(splits(*p) == std::vector<std::string>{"*0/2", "whole"});
  CHECK(p->nodes(1).rule() == "data: no batch dim");
}

TEST_CASE("hybrid is tp over --plan-ngpus with data-parallel copies", "[plan][policy]") {
  ir::Graph g = testgraphs::mlp();
  auto p = plan::makePlan(g, options("hybrid", 8, 2));
  REQUIRE(p.isOk());
  CHECK(p->policy() == "hybrid");
  CHECK(p->plan_ngpus() == 2);
  CHECK(p->runtime_ngpus() == 8);
  auto noT = plan::makePlan(g, options("hybrid", 8));
  REQUIRE_FALSE(noT.isOk());
  CHECK(noT.status().message().find("policy 'hybrid' needs --plan-ngpus T") != std::string::npos);
  auto uneven = plan::makePlan(g, options("tp", 6, 4));
  REQUIRE_FALSE(uneven.isOk());
  CHECK(uneven.status().message() ==
        "error: --runtime-ngpus 6 is not a multiple of --plan-ngpus 4");
}

TEST_CASE("plan primitives refuse frozen dims and name the node", "[plan][policy]") {
  testgraphs::Builder b;
  int64_t x = b.input("x", {4, 8});
  b.graph.outputs = {b.op("aten::layer_norm", {x}, {4, 8}, "a b^ -> a b^", "blocks.0.ln")};
  const ir::Node &ln = b.graph.nodes()[0];
  auto frozen = plan::splitNodeByIdent(b.graph, ln, "b", {0, 1}, "");
  REQUIRE_FALSE(frozen.isOk());
  CHECK(frozen.status().message() ==
        "cannot split node 0 aten::layer_norm at blocks.0.ln (model.py:10) along 'b' into 2: "
        "dimension 'b' is frozen (^) and cannot be split");
  auto odd = plan::splitNodeByDim(b.graph, ln, 0, 0, {0, 1, 2}, "");
  REQUIRE_FALSE(odd.isOk());
  CHECK(odd.status().message().find("has size 4, which is not divisible into 3 parts") !=
        std::string::npos);
  auto unknown = plan::splitNodeByIdent(b.graph, ln, "z", {0, 1}, "");
  REQUIRE_FALSE(unknown.isOk());
  CHECK(unknown.status().message().find("unknown dimension 'z'; expected one of: a") !=
        std::string::npos);
  auto ok = plan::splitNodeByDim(b.graph, ln, 0, -2, {0, 1}, "r");
  REQUIRE(ok.isOk());
  CHECK(ok->input() == 0);
  CHECK(ok->dim() == -2);
  CHECK(ok->num() == 2);
  CHECK(ok->rule() == "r");
}

TEST_CASE("a plain dim in no output splits only the graph's loss", "[plan][policy]") {
  testgraphs::Builder b;
  int64_t x = b.input("x", {4, 8});
  // A user op claiming its output does not depend on a: splitting a would have
  // every part "compute" the same output from different rows.
  int64_t y = b.op("myops::colsum", {x}, {8}, "a b -> b", "head");
  b.graph.outputs = {y};
  const ir::Node &op = b.graph.nodes()[0];
  auto bad = plan::splitNodeByIdent(b.graph, op, "a", {0, 1}, "");
  REQUIRE_FALSE(bad.isOk());
  CHECK(bad.status().message().find("dimension 'a' is in none of the op's outputs") !=
        std::string::npos);
  CHECK(plan::splitNodeByIdent(b.graph, op, "b", {0, 1}, "").isOk());
  // The same annotation on the graph's loss: each part's value is its share.
  b.graph.lossOutput = 0;
  CHECK(plan::splitNodeByIdent(b.graph, op, "a", {0, 1}, "").isOk());
}
