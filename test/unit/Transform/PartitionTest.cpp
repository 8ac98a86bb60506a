#include "../CatchCompat.h"

#include "../Plan/HandGraphs.h"
#include "nnsc/Ops/OpRegistry.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Transform/Partition.h"

using namespace nnsc;
using namespace nnsc::transform;
using nnsc::testgraphs::Builder;
using nnsc::testgraphs::kLinear;

namespace {

/// What each node does, by node id: an identifier to split along over all
/// devices, or "" to replicate.
proto::Plan planFor(const ir::Graph &g, int ngpus, const std::vector<std::string> &idents) {
  proto::Plan plan;
  plan.set_format_version(plan::kPlanFormatVersion);
  plan.set_policy("test");
  plan.set_plan_ngpus(ngpus);
  plan.set_runtime_ngpus(ngpus);
  plan.set_micro_batches(1);
  auto *stage = plan.add_stages();
  for (int d = 0; d < ngpus; ++d)
    stage->add_devices(d);
  for (const ir::Node &node : g.nodes()) {
    const std::string &id = idents.at(static_cast<size_t>(node.id));
    if (id.empty()) {
      *plan.add_nodes() = plan::replicateNode(node, plan::firstDevices(ngpus), "");
      continue;
    }
    auto np = plan::splitNodeByIdent(g, node, id, plan::firstDevices(ngpus), "");
    REQUIRE(np.isOk());
    *plan.add_nodes() = *np;
  }
  REQUIRE(plan::validatePlan(plan, g).isOk());
  return plan;
}

PartitionedGraph partition(const ir::Graph &g, const proto::Plan &plan) {
  auto pg = partitionGraph(g, plan);
  INFO(pg.status().message());
  REQUIRE(pg.isOk());
  return pg.take();
}

// x[4, 8] -> linear(w[16, 8]) -> y[4, 16], y the only output.
ir::Graph oneLinear() {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("w", {16, 8});
  b.graph.outputs = {b.op("aten::linear", {x, w}, {4, 16}, kLinear, "fc")};
  return b.graph;
}

SubTensor sub(int64_t t, std::vector<int64_t> start, std::vector<int64_t> stop, int v = 0,
              int vn = 1) {
  return {t, std::move(start), std::move(stop), v, vn};
}

} // namespace

TEST_CASE("linear split along n: column parallel, weight rows sharded", "[partition]") {
  ir::Graph g = oneLinear();
  PartitionedGraph pg = partition(g, planFor(g, 2, {"n"}));
  REQUIRE(pg.parts[0].size() == 2);
  const NodePart &p1 = pg.parts[0][1];
  CHECK(p1.device == 1);
  CHECK(p1.inputs[0] == sub(0, {0, 0}, {4, 8}));
  CHECK(p1.inputs[1] == sub(1, {8, 0}, {16, 8}));
  CHECK(p1.outputs[0] == sub(2, {0, 8}, {4, 16}));
  CHECK(p1.outputs[0].shape() == ir::Shape{4, 8});
  CHECK(pg.tensors[1].layout.str() == "R1V1D2,1"); // the weight as its reader wants it
  CHECK(pg.adapters.empty());                      // x has no gradient: nothing to sum
  REQUIRE(pg.reducers.size() == 2);
  CHECK(pg.reducers[1].devices == std::vector<int>{1});
}

TEST_CASE("linear split along k: value split into partial sums", "[partition]") {
  ir::Graph g = oneLinear();
  PartitionedGraph pg = partition(g, planFor(g, 2, {"k"}));
  const NodePart &p0 = pg.parts[0][0];
  CHECK(p0.inputs[0] == sub(0, {0, 0}, {4, 4}));
  CHECK(p0.inputs[1] == sub(1, {0, 0}, {16, 4}));
  CHECK(p0.outputs[0] == sub(2, {0, 0}, {4, 16}, 0, 2));
  CHECK(pg.parts[0][1].outputs[0].str() == "[0:4, 0:16] v1/2");
  CHECK(pg.tensors[2].layout.str() == "R1V2D1,1");
  // x is fed whole and each device takes its columns locally.
  REQUIRE(pg.adapters.size() == 1);
  REQUIRE(pg.adapters[0].ops.size() == 1);
  CHECK(pg.adapters[0].ops[0].op == "split");
  CHECK(pg.adapters[0].ops[0].args == std::vector<int64_t>{1});
  CHECK(pg.adapters[0].ops[0].outShape == ir::Shape{4, 4});
}

TEST_CASE("linear split along the batch: replicated weight with partial gradients", "[partition]") {
  ir::Graph g = oneLinear();
  PartitionedGraph pg = partition(g, planFor(g, 2, {"*0"}));
  CHECK(pg.parts[0][1].inputs[1] == sub(1, {0, 0}, {16, 8}));
  CHECK(pg.parts[0][1].outputs[0] == sub(2, {2, 0}, {4, 16}));
  CHECK(pg.adapters.size() == 1); // x: a local chunk of the replicated feed
  REQUIRE(pg.reducers.size() == 1);
  CHECK(pg.reducers[0].tensor == 1);
  CHECK(pg.reducers[0].devices == std::vector<int>{0, 1});
  CHECK(pg.reducers[0].reduce == GradReduce::Sum);
}

TEST_CASE("column then row parallel: no communication between, one all_reduce after",
          "[partition]") {
  ir::Graph g = testgraphs::mlp();
  // fc1 on n, gelu on its columns, fc2 on the contracted k, the loss replicated.
  PartitionedGraph pg = partition(g, planFor(g, 2, {"n", "b", "k", ""}));
  REQUIRE(pg.adapters.size() == 1);
  const Adapter &a = pg.adapters[0];
  CHECK(a.tensor == g.nodes()[2].outputs[0]);
  CHECK(a.producer.str() == "R1V2D1,1");
  CHECK(a.consumer.str() == "R2V1D1,1");
  REQUIRE(a.ops.size() == 1);
  CHECK(a.ops[0].op == "all_reduce");
  CHECK(a.ops[0].backward == Primitive::Identity);
  CHECK(a.ops[0].groups == std::vector<std::vector<int>>{{0, 1}});
  CHECK(a.readers == std::vector<std::pair<int64_t, int>>{{3, 0}});
  CHECK(pg.parts[1][0].inputAdapters == std::vector<int>{-1});
  CHECK(pg.parts[2][0].inputAdapters == std::vector<int>{-1, -1});
  CHECK(pg.parts[3][1].inputAdapters == std::vector<int>{0});
  CHECK(!pg.loss.partial);
}

TEST_CASE("a replicated activation entering a split node sums its gradients (Megatron f)",
          "[partition]") {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w0 = b.param("w0", {8, 8});
  int64_t w1 = b.param("w1", {16, 8});
  int64_t h = b.op("aten::linear", {x, w0}, {4, 8}, kLinear, "fc0");
  b.graph.outputs = {b.op("aten::linear", {h, w1}, {4, 16}, kLinear, "fc1")};
  PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"", "n"}));
  REQUIRE(pg.adapters.size() == 1);
  REQUIRE(pg.adapters[0].ops.size() == 1);
  CHECK(pg.adapters[0].tensor == h);
  CHECK(pg.adapters[0].forward.steps.empty());
  CHECK(pg.adapters[0].ops[0].op == "identity_all_reduce");
  CHECK(pg.adapters[0].ops[0].backward == Primitive::AllReduce);
  // w0 is read by a replicated node: identical whole gradients.
  CHECK(pg.reducers[0].reduce == GradReduce::Average);
  CHECK(pg.reducers[0].devices == std::vector<int>{0, 1});
}

TEST_CASE("gathering for a replicated reader keeps whole gradients", "[partition]") {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("w", {16, 8});
  int64_t y = b.op("aten::linear", {x, w}, {4, 16}, kLinear, "fc");
  int64_t s = b.param("s", {2});
  // A reader split along c, which y lacks: each part reads y whole.
  b.graph.outputs = {b.op("aten::mul", {s, y}, {2, 4, 16}, "c, a b -> c a b", "scale")};
  SECTION("replicated reader: all_gather, backward keeps each chunk") {
    PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"n", ""}));
    REQUIRE(pg.adapters.size() == 1);
    REQUIRE(pg.adapters[0].ops.size() == 1);
    CHECK(pg.adapters[0].ops[0].op == "all_gather_split");
    CHECK(pg.adapters[0].ops[0].args == std::vector<int64_t>{1});
    CHECK(pg.adapters[0].ops[0].backward == Primitive::Chunk);
  }
  SECTION("split reader that reads it whole: all_gather, backward reduce_scatter") {
    PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"n", "c"}));
    REQUIRE(pg.adapters.size() == 1);
    REQUIRE(pg.adapters[0].ops.size() == 1);
    CHECK(pg.adapters[0].ops[0].op == "all_gather");
    CHECK(pg.adapters[0].ops[0].backward == Primitive::ReduceScatter);
  }
  SECTION("split along the dim y has: all_to_all") {
    PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"n", "a"}));
    REQUIRE(pg.adapters.size() == 1);
    CHECK(pg.adapters[0].ops[0].op == "all_to_all");
  }
}

TEST_CASE("an interleaved column split: each device holds its rows of every block", "[partition]") {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("w", {48, 8});
  int64_t y = b.op("aten::linear", {x, w}, {4, 48}, kLinear, "qkv");
  b.graph.outputs = {b.op("aten::relu", {y}, {4, 48}, "a b -> a b", "act")};
  proto::Plan plan = planFor(b.graph, 2, {"", ""});
  auto np = plan::splitNodeByIdent(b.graph, b.graph.nodes()[0], "n", plan::firstDevices(2), "", 3);
  REQUIRE(np.isOk());
  *plan.mutable_nodes(0) = *np;

  SECTION("the reader follows the blocks: no communication") {
    auto follow =
        plan::splitNodeByIdent(b.graph, b.graph.nodes()[1], "b", plan::firstDevices(2), "", 3);
    REQUIRE(follow.isOk());
    *plan.mutable_nodes(1) = *follow;
    PartitionedGraph pg = partition(b.graph, plan);
    const SubTensor &wPiece = pg.parts[0][1].inputs[1];
    CHECK(wPiece.str() == "[8:16{3}, 0:8]"); // rows 8:16, 24:32, 40:48
    CHECK(wPiece.shape() == ir::Shape{24, 8});
    CHECK(pg.tensors[static_cast<size_t>(y)].layout.str() == "R1V1D1,2{3}");
    CHECK(pg.adapters.empty());
  }
  SECTION("a replicated reader gathers through the blocked view") {
    PartitionedGraph pg = partition(b.graph, plan);
    REQUIRE(pg.adapters.size() == 1);
    const Adapter &a = pg.adapters[0];
    REQUIRE(a.ops.size() == 3);
    CHECK(a.ops[0].op == "reshape");
    CHECK(a.ops[0].outShape == ir::Shape{4, 3, 8});
    CHECK(a.ops[1].op == "all_gather_split");
    CHECK(a.ops[1].args == std::vector<int64_t>{2});
    CHECK(a.ops[1].outShape == ir::Shape{4, 3, 16});
    CHECK(a.ops[2].op == "reshape");
    CHECK(a.ops[2].outShape == ir::Shape{4, 48});
  }
  SECTION("a reader cutting the dim contiguously: gather, then cut anew") {
    auto contiguous =
        plan::splitNodeByIdent(b.graph, b.graph.nodes()[1], "b", plan::firstDevices(2), "");
    REQUIRE(contiguous.isOk());
    *plan.mutable_nodes(1) = *contiguous;
    PartitionedGraph pg = partition(b.graph, plan);
    REQUIRE(pg.adapters.size() == 1);
    std::vector<std::string> ops;
    for (const CommOp &op : pg.adapters[0].ops)
      ops.push_back(op.op);
    CHECK(ops == std::vector<std::string>{"reshape", "all_gather_split", "reshape", "split"});
    CHECK(pg.adapters[0].ops.back().outShape == ir::Shape{4, 24});
  }
}

TEST_CASE("one adapter per distinct layout a tensor is read in", "[partition]") {

  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("w", {8, 8});
  int64_t y = b.op("aten::linear", {x, w}, {4, 8}, kLinear, "fc");
  int64_t r1 = b.op("aten::gelu", {y}, {4, 8}, "a b -> a b", "r1");
  int64_t r2 = b.op("aten::gelu", {y}, {4, 8}, "a b -> a b", "r2");
  int64_t c1 = b.op("aten::relu", {y}, {4, 8}, "a b -> a b", "c1");
  b.graph.outputs = {r1, r2, c1};
  PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"n", "", "", "a"}));
  REQUIRE(pg.adapters.size() == 2);
  CHECK(pg.adapters[0].readers.size() == 2); // both replicated readers share the gather
  CHECK(pg.adapters[1].readers == std::vector<std::pair<int64_t, int>>{{3, 0}});
  CHECK(pg.adapters[1].ops[0].op == "all_to_all");
  std::vector<ProgramStep> prog = deviceProgram(pg, 1);
  REQUIRE(prog.size() == 6);
  CHECK(prog[1].kind == ProgramStep::RunAdapter);
  CHECK(prog[1].index == 0);
  CHECK(prog[4].kind == ProgramStep::RunAdapter);
  CHECK(prog[5].index == 3);
}

TEST_CASE("the loss of a batch-split node is partial and scaled by its share", "[partition]") {
  SECTION("a sum split by value: partial sums, scale 1") {
    ir::Graph g = testgraphs::mlp();
    PartitionedGraph pg = partition(g, planFor(g, 2, {"*0", "a", "*0", "a"}));
    CHECK(pg.loss.partial);
    REQUIRE(pg.loss.parts.size() == 2);
    CHECK(pg.loss.parts[1].slice.valueIndex == 1);
    CHECK(pg.loss.parts[1].scale == 1.0);
    CHECK(pg.adapters.size() == 1); // x chunked locally; nothing else moves
  }
  SECTION("a per-part mean: each part weighs its share of the batch") {
    Builder b;
    int64_t x = b.input("x", {8, 4});
    int64_t w = b.param("w", {4, 4});
    int64_t y = b.op("aten::linear", {x, w}, {8, 4}, kLinear, "fc");
    b.loss(b.op("aten::mean", {y}, {1}, "a b^ -> 1", "loss"));
    PartitionedGraph pg = partition(b.graph, planFor(b.graph, 4, {"*0", "a"}));
    CHECK(pg.loss.partial);
    REQUIRE(pg.loss.parts.size() == 4);
    CHECK(pg.loss.parts[3].device == 3);
    CHECK(pg.loss.parts[3].scale == 0.25);
  }
}

TEST_CASE("the data policy splits a mean cross-entropy loss instead of gathering logits",
          "[partition]") {
  Builder b;
  int64_t x = b.input("x", {8, 4});
  int64_t y = b.input("y", {8}, ir::DType::Int64);
  int64_t w = b.param("w", {5, 4});
  int64_t logits = b.op("aten::linear", {x, w}, {8, 5}, "", "fc");
  b.loss(b.op("aten::cross_entropy_loss", {logits, y}, {}, "", "loss"));
  REQUIRE(ops::annotateGraph(b.graph, ops::OpRegistry::builtin()).isOk());
  CHECK(b.graph.nodes()[1].annotations == std::vector<std::string>{"a b^, a -> ()"});
  plan::PlanOptions options;
  options.policy = "data";
  options.runtimeNgpus = 2;
  auto plan = plan::makePlan(b.graph, options);
  REQUIRE(plan.isOk());
  CHECK(plan->nodes(1).num() == 2);
  PartitionedGraph pg = partition(b.graph, *plan);
  CHECK(pg.adapters.empty()); // x and y are fed split; nothing moves
  CHECK(pg.loss.partial);
  REQUIRE(pg.loss.parts.size() == 2);
  CHECK(pg.loss.parts[1].device == 1);
  CHECK(pg.loss.parts[1].scale == 0.5);
}

TEST_CASE("tensors moving between device sets are reported", "[partition]") {
  ir::Graph g = oneLinear();
  Builder b;
  b.graph = g;
  b.graph.outputs = {b.op("aten::gelu", {2}, {4, 16}, "a b -> a b", "act")};
  proto::Plan plan = planFor(b.graph, 2, {"", ""});
  plan.mutable_nodes(0)->clear_devices();
  plan.mutable_nodes(0)->add_devices(0);
  auto pg = partitionGraph(b.graph, plan);
  REQUIRE_FALSE(pg.isOk());
  INFO(pg.status().message());
  CHECK(pg.status().message() ==
        "tensor %0 'x' read by node 0 aten::linear at fc (model.py:10) (input 0): it lives on "
        "devices [0, 1] but the reader runs on [0]; a tensor changes devices only between "
        "pipeline stages (give the nodes different stages)");
}

TEST_CASE("localArgs rewrites view sizes for the local shapes", "[partition]") {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t v = b.op("aten::view", {x}, {4, 2, 4}, "a (b 4) -> a b 4", "v");
  b.graph.nodes()[0].args.push_back({"size", std::vector<int64_t>{4, 2, 4}});
  b.graph.outputs = {v};
  PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"b"}));
  auto args = localArgs(b.graph, pg.parts[0][1]);
  REQUIRE(args.isOk());
  CHECK(std::get<std::vector<int64_t>>(args->back().value) == std::vector<int64_t>{4, 1, 4});
}

TEST_CASE("a plan.pb that no longer fits a node is a user error naming it", "[partition]") {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  b.graph.outputs = {b.op("myops::colsum", {x}, {8}, "a b -> b", "head")};
  // Written by hand (or an older nnsc-plan): split along a, which no output has.
  proto::Plan plan = planFor(b.graph, 2, {""});
  proto::NodePlan *np = plan.mutable_nodes(0);
  np->set_ident("a");
  np->set_num(2);
  auto pg = partitionGraph(b.graph, plan);
  REQUIRE_FALSE(pg.isOk());
  CHECK(pg.status().kind() == ErrorKind::BadInput);
  CHECK_THAT(pg.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "error: the plan does not fit node 0 myops::colsum at head"));
  CHECK_THAT(pg.status().message(),
             Catch::Matchers::ContainsSubstring("dimension 'a' is in none of the op's outputs"));
}
