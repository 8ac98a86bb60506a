// Buffers the forward updates: state writes of the partition pass (each
// buffer piece takes the new value in its stored layout) and kernels that
// update a buffer in place (batch_norm's running statistics).
#include "../CatchCompat.h"

#include "../Plan/HandGraphs.h"
#include "nnsc/Ops/KernelWrites.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Transform/Partition.h"

using namespace nnsc;
using namespace nnsc::transform;
using nnsc::testgraphs::Builder;

namespace {

// By node id: an identifier to split along over all devices, "" to replicate.
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

std::vector<std::pair<ProgramStep::Kind, int>> tail(const std::vector<ProgramStep> &steps,
                                                    size_t n) {
  std::vector<std::pair<ProgramStep::Kind, int>> out;
  for (size_t i = steps.size() - std::min(n, steps.size()); i < steps.size(); ++i)
    out.emplace_back(steps[i].kind, steps[i].index);
  return out;
}

// x[4, 4, 5] -> batch_norm(x, w, b, running_mean, running_var, training)
// `times` times over the same buffers; node k split as idents[k].
ir::Graph batchNorms(int times) {
  Builder b;
  int64_t x = b.input("x", {4, 4, 5});
  int64_t w = b.param("bn.weight", {4});
  int64_t bias = b.param("bn.bias", {4});
  int64_t rm = b.buffer("bn.running_mean", {4});
  int64_t rv = b.buffer("bn.running_var", {4});
  int64_t y = x;
  for (int k = 0; k < times; ++k) {
    y = b.op("aten::batch_norm", {y, w, bias, rm, rv}, {4, 4, 5}, "a^ b c^, b, b, b, b -> a^ b c^",
             "bn");
    ir::Node &n = b.graph.nodes().back();
    n.args = {{"input", ir::TensorRef{0}},
              {"weight", ir::TensorRef{1}},
              {"bias", ir::TensorRef{2}},
              {"running_mean", ir::TensorRef{3}},
              {"running_var", ir::TensorRef{4}},
              {"training", true},
              {"momentum", 0.1},
              {"eps", 1e-5},
              {"cudnn_enabled", false}};
  }
  b.loss(b.op("aten::sum", {y}, {1}, "a+ b+ c+ -> 1", "loss"));
  return b.graph;
}

} // namespace

TEST_CASE("state writes: a buffer stored split takes its split value directly",
          "[partition][state]") {
  ir::Graph g = testgraphs::runningStats();
  // neg and add on the buffer's dim, fc on n, mean on b: the new mean is
  // computed in the pieces the buffer is stored in.
  PartitionedGraph pg = partition(g, planFor(g, 2, {"a", "n", "b", "a", "", ""}));
  REQUIRE(pg.stateWrites.size() == 2);
  CHECK(pg.stateWrites[0].state == 2);
  CHECK(pg.stateWrites[0].value == g.stateUpdates[0].value);
  CHECK(pg.stateWrites[0].adapter == -1);
  CHECK(pg.tensors[2].layout.str() == "R1V1D2");
  CHECK(pg.stateWrites[1].state == 3);
  CHECK(pg.stateWrites[1].adapter == -1);
  // Both devices hold pieces of both buffers: the program ends with the writes.
  for (int d = 0; d < 2; ++d)
    CHECK(tail(deviceProgram(pg, d), 2) ==
          std::vector<std::pair<ProgramStep::Kind, int>>{{ProgramStep::WriteState, 0},
                                                         {ProgramStep::WriteState, 1}});
}

TEST_CASE("state writes: a split value is gathered into a replicated buffer, without gradient",
          "[partition][state]") {
  ir::Graph g = testgraphs::runningStats();
  // neg replicated (the buffer is stored whole on both devices), add split.
  PartitionedGraph pg = partition(g, planFor(g, 2, {"", "n", "b", "a", "", ""}));
  CHECK(pg.tensors[2].layout.str() == "R2V1D1");
  REQUIRE(pg.stateWrites.size() == 2);
  int a = pg.stateWrites[0].adapter;
  REQUIRE(a >= 0);
  const Adapter &adapter = pg.adapters[static_cast<size_t>(a)];
  CHECK(adapter.tensor == g.stateUpdates[0].value);
  CHECK(adapter.producer.str() == "R1V1D2");
  CHECK(adapter.consumer.str() == "R2V1D1");
  CHECK_FALSE(adapter.needsGrad);
  CHECK(adapter.readers.empty());
  REQUIRE(adapter.ops.size() == 1);
  CHECK(adapter.ops[0].forward == Primitive::AllGather);
  // The gather runs after every node, just before the writes.
  CHECK(tail(deviceProgram(pg, 1), 3) ==
        std::vector<std::pair<ProgramStep::Kind, int>>{{ProgramStep::RunAdapter, a},
                                                       {ProgramStep::WriteState, 0},
                                                       {ProgramStep::WriteState, 1}});
}

TEST_CASE("kernelWrittenInputs: batch_norm in training writes its running statistics",
          "[ops][state]") {
  ir::Graph g = batchNorms(1);
  const ir::Node &bn = g.nodes()[0];
  CHECK(ops::kernelWrittenInputs(bn) == std::vector<int>{3, 4});
  ir::Node eval = bn;
  eval.args[5].value = false;
  CHECK(ops::kernelWrittenInputs(eval).empty());
  ir::Node instance = bn;
  instance.op = "aten::instance_norm";
  instance.args[5].name = "use_input_stats";
  CHECK(ops::kernelWrittenInputs(instance) == std::vector<int>{3, 4});
  CHECK(ops::kernelWrittenInputs(g.nodes()[1]).empty()); // the sum
}

TEST_CASE("a buffer batch_norm updates in place is stored as batch_norm reads it",
          "[partition][state]") {
  ir::Graph g = batchNorms(1);
  // Channels split: each device's kernel updates its own slice of the stats.
  PartitionedGraph pg = partition(g, planFor(g, 2, {"b", ""}));
  const NodePart &p1 = pg.parts[0][1];
  CHECK(p1.inputAdapters[3] == -1);
  CHECK(p1.inputAdapters[4] == -1);
  CHECK(pg.tensors[3].pieceOn(1)->str() == "[2:4]");
}

TEST_CASE("a buffer two batch_norms update in different splits is an error naming it",
          "[partition][state]") {
  ir::Graph g = batchNorms(2);
  auto pg = partitionGraph(g, planFor(g, 2, {"", "b", ""}));
  REQUIRE_FALSE(pg.isOk());
  const std::string &m = pg.status().message();
  INFO(m);
  CHECK(m.find("updates buffer 'bn.running_mean' (%3) in place") != std::string::npos);
  CHECK(m.find("error: node 1 aten::batch_norm at bn (model.py:11) updates") != std::string::npos);
  CHECK(m.find("the update would go to a temporary copy") != std::string::npos);
}
