// Addends (a bias, `+n` in `* k+, n k+, +n -> * n`) under the partition: cut
// along the reduction, the node reads them as value chunks (one part the
// value, the others zeros), so the partial sums add the bias once; the
// parameter stays whole on every device with whole, identical gradients.
#include "../CatchCompat.h"

#include "../Plan/HandGraphs.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Transform/Partition.h"

using namespace nnsc;
using namespace nnsc::transform;
using nnsc::testgraphs::Builder;

namespace {

constexpr const char *kBiasedLinear = "* k+, n k+, +n -> * n";

/// Node i split along idents[i] over all devices ("" replicates it).
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
    auto np =
        id.empty()
            ? Expected<proto::NodePlan>(plan::replicateNode(node, plan::firstDevices(ngpus), ""))
            : plan::splitNodeByIdent(g, node, id, plan::firstDevices(ngpus), "");
    INFO(np.status().message());
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

/// x[4, 8] -> fc: linear(w[16, 8], bias[16]) -> y[4, 16], y the output.
struct BiasedLinear {
  Builder b;
  int64_t x, w, bias, y;
  BiasedLinear() {
    x = b.input("x", {4, 8});
    w = b.param("fc.weight", {16, 8});
    bias = b.param("fc.bias", {16});
    y = b.op("aten::linear", {x, w, bias}, {4, 16}, kBiasedLinear, "fc");
    b.graph.outputs = {y};
  }
};

const GradReducer &reducerOf(const PartitionedGraph &pg, int64_t tensor) {
  for (const GradReducer &r : pg.reducers)
    if (r.tensor == tensor)
      return r;
  FAIL("no reducer for tensor " << tensor);
  return pg.reducers.front();
}

std::vector<std::string> opsOf(const Adapter &a) {
  std::vector<std::string> ops;
  for (const CommOp &op : a.ops)
    ops.push_back(op.op);
  return ops;
}

} // namespace

TEST_CASE("row-parallel linear with a bias: the bias is value-split, added once",
          "[partition][addend]") {
  BiasedLinear m;
  PartitionedGraph pg = partition(m.b.graph, planFor(m.b.graph, 2, {"k"}));
  // Each part reads a value chunk of the whole bias and writes a partial sum.
  for (int p = 0; p < 2; ++p) {
    const NodePart &part = pg.parts[0][static_cast<size_t>(p)];
    CHECK(part.inputs[2].str() == (p == 0 ? "[0:16] v0/2" : "[0:16] v1/2"));
    CHECK(part.inputs[2].shape() == ir::Shape{16});
    CHECK(part.outputs[0].valueChunks == 2);
  }
  // Stored whole on both devices (never as partial sums).
  CHECK(pg.tensors[static_cast<size_t>(m.bias)].layout.str() == "R2V1D1");
  // x is cut locally; the bias goes through one local value_split whose
  // backward hands each device the whole gradient (no sum of partials).
  REQUIRE(pg.adapters.size() == 2);
  const Adapter &a = pg.adapters[1];
  CHECK(a.tensor == m.bias);
  CHECK(a.consumer.str() == "R1V2D1");
  REQUIRE(a.ops.size() == 1);
  CHECK(a.ops[0].op == "value_split");
  CHECK(a.ops[0].forward == Primitive::ValueSplit);
  CHECK(a.ops[0].backward == Primitive::Identity);
  CHECK(a.ops[0].args.empty());
  CHECK(a.ops[0].groups == std::vector<std::vector<int>>{{0, 1}});
  CHECK(a.ops[0].outShape == ir::Shape{16});
  CHECK(pg.parts[0][1].inputAdapters == std::vector<int>{0, -1, 1});
  // Identical whole gradients of the bias: averaged, which keeps them equal.
  const GradReducer &r = reducerOf(pg, m.bias);
  CHECK(r.reduce == GradReduce::Average);
  CHECK(r.devices == std::vector<int>{0, 1});
  CHECK(r.slice.str() == "[0:16]");
  CHECK(reducerOf(pg, m.w).devices.size() == 1); // column shards of the weight
}

TEST_CASE("a biased linear cut along n or the batch reads its bias as before",
          "[partition][addend]") {
  BiasedLinear m;
  SECTION("column parallel: the bias is cut with the weight rows") {
    PartitionedGraph pg = partition(m.b.graph, planFor(m.b.graph, 2, {"n"}));
    CHECK(pg.parts[0][1].inputs[2].str() == "[8:16]");
    CHECK(pg.tensors[static_cast<size_t>(m.bias)].layout.str() == "R1V1D2");
    CHECK(pg.adapters.empty());
  }
  SECTION("batch split: every part adds all of it; the gradients are partial, summed") {
    PartitionedGraph pg = partition(m.b.graph, planFor(m.b.graph, 2, {"*0"}));
    CHECK(pg.parts[0][1].inputs[2].str() == "[0:16]");
    CHECK(pg.parts[0][1].inputAdapters[2] == -1);
    CHECK(reducerOf(pg, m.bias).reduce == GradReduce::Sum);
  }
}

TEST_CASE("a bias read by a row-parallel and a batch-split node sums the partial read",
          "[partition][addend]") {
  BiasedLinear m;
  int64_t u = m.b.input("u", {4, 16});
  m.b.graph.outputs.push_back(m.b.op("aten::add", {u, m.bias}, {4, 16}, "a b, b -> a b", "shift"));
  PartitionedGraph pg = partition(m.b.graph, planFor(m.b.graph, 2, {"k", "a"}));
  // One read wants whole gradients, so the partial one sums them in backward
  // (Megatron f) and the reducer averages identical gradients.
  CHECK(reducerOf(pg, m.bias).reduce == GradReduce::Average);
  bool summed = false;
  for (const Adapter &a : pg.adapters)
    if (a.tensor == m.bias && opsOf(a) == std::vector<std::string>{"identity_all_reduce"})
      summed = a.readers == std::vector<std::pair<int64_t, int>>{{1, 1}};
  CHECK(summed);
}

TEST_CASE("an addend computed split along its dim is gathered, then value-split",
          "[partition][addend]") {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("fc.weight", {16, 8});
  int64_t p = b.param("p", {16});
  int64_t bias = b.op("aten::relu", {p}, {16}, "a -> a", "act");
  b.graph.outputs = {b.op("aten::linear", {x, w, bias}, {4, 16}, kBiasedLinear, "fc")};
  PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"a", "k"}));
  const Adapter *a = nullptr;
  for (const Adapter &candidate : pg.adapters)
    if (candidate.tensor == bias)
      a = &candidate;
  REQUIRE(a != nullptr);
  CHECK(a->producer.str() == "R1V1D2");
  CHECK(a->consumer.str() == "R1V2D1");
  CHECK(opsOf(*a) == std::vector<std::string>{"all_gather_split", "value_split"});
  // The gathered value's gradient is whole on each device: keep its chunk.
  CHECK(a->ops[0].backward == Primitive::Chunk);
}

TEST_CASE("addends of a 0-dim or one-element bias are value-split alike", "[partition][addend]") {
  for (const ir::Shape &shape : {ir::Shape{}, ir::Shape{1}}) {
    Builder b;
    int64_t x = b.input("x", {4, 8});
    int64_t w = b.param("fc.weight", {16, 8});
    int64_t bias = b.param("fc.bias", shape);
    std::string anno = shape.empty() ? "* k+, n k+, +() -> * n" : "* k+, n k+, +1 -> * n";
    b.graph.outputs = {b.op("aten::linear", {x, w, bias}, {4, 16}, anno, "fc")};
    PartitionedGraph pg = partition(b.graph, planFor(b.graph, 2, {"k"}));
    INFO("bias of shape " << ir::shapeString(shape));
    CHECK(pg.parts[0][1].inputs[2].valueChunks == 2);
    REQUIRE(pg.adapters.size() == 2);
    CHECK(opsOf(pg.adapters[1]) == std::vector<std::string>{"value_split"});
    CHECK(reducerOf(pg, bias).reduce == GradReduce::Average);
  }
}
