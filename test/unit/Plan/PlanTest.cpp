#include "../CatchCompat.h"

#include <filesystem>
#include <sstream>

#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Plan/PlanIO.h"
#include "nnsc/Plan/PlanPrinter.h"

using namespace nnsc;
using namespace nnsc::ir;

namespace {

// x[4, 8] -> linear(w[16, 8], b[16]) -> y[4, 16] -> sum -> loss; a buffer m[16].
Graph linearGraph() {
  Graph g;
  g.name = "Lin";
  int64_t x = g.addTensor({-1, "x", {4, 8}, DType::Float32, false, TensorKind::Input, {}, {}});
  int64_t w = g.addTensor(
      {-1, "fc.weight", {16, 8}, DType::Float32, true, TensorKind::Param, {"head.weight"}, {}});
  int64_t b = g.addTensor({-1, "fc.bias", {16}, DType::Float32, true, TensorKind::Param, {}, {}});
  g.addTensor({-1, "m", {16}, DType::Float32, false, TensorKind::Buffer, {}, {}});
  int64_t y =
      g.addTensor({-1, "y", {4, 16}, DType::Float32, false, TensorKind::Activation, {}, {}});
  int64_t l = g.addTensor({-1, "l", {}, DType::Float32, false, TensorKind::Activation, {}, {}});
  Node lin;
  lin.op = "aten::linear";
  lin.inputs = {x, w, b};
  lin.outputs = {y};
  lin.args = {{"input", TensorRef{0}}, {"weight", TensorRef{1}}, {"bias", TensorRef{2}}};
  lin.annotations = {"* k^, n k^, n -> * n"};
  lin.modulePath = "fc";
  lin.moduleClass = "Linear";
  g.addNode(lin);
  Node sum;
  sum.op = "aten::sum";
  sum.inputs = {y};
  sum.outputs = {l};
  sum.args = {{"self", TensorRef{0}}, {"dtype", NoneValue{}}};
  g.addNode(sum);
  g.inputs = {x};
  g.outputs = {l};
  g.lossOutput = 0;
  return g;
}

plan::PlanOptions dpOptions(int ngpus) {
  plan::PlanOptions o;
  o.policy = "dp";
  o.runtimeNgpus = ngpus;
  o.graphPath = "lin/graph.pb";
  return o;
}

} // namespace

TEST_CASE("dp plans one whole copy of every node on device 0", "[plan]") {
  Graph g = linearGraph();
  auto p = plan::makePlan(g, dpOptions(4));
  REQUIRE(p.isOk());
  CHECK(p->policy() == "dp");
  CHECK(p->format_version() == plan::kPlanFormatVersion);
  CHECK(p->plan_ngpus() == 1);
  CHECK(p->runtime_ngpus() == 4);
  CHECK(p->micro_batches() == 1);
  CHECK(p->graph() == "lin/graph.pb");
  CHECK(p->graph_fingerprint() == plan::graphFingerprint(g));
  REQUIRE(p->nodes_size() == 2);
  for (const auto &np : p->nodes()) {
    CHECK(np.num() == 1);
    CHECK(std::vector<int>(np.devices().begin(), np.devices().end()) == std::vector<int>{0});
    CHECK(np.recompute_group() == -1);
  }
  CHECK(plan::validatePlan(*p, g).isOk());
}

TEST_CASE("plan options are checked with messages naming the bad value", "[plan]") {
  Graph g = linearGraph();
  plan::PlanOptions o = dpOptions(2);
  o.policy = "tpp";
  auto p = plan::makePlan(g, o);
  REQUIRE_FALSE(p.isOk());
  CHECK(p.status().message() ==
        "error: unknown policy 'tpp'; expected one of: dp, pp, tp, data, hybrid, autodist, file");
  CHECK(p.status().kind() == ErrorKind::BadInput);
  auto zero = plan::makePlan(g, dpOptions(0));
  REQUIRE_FALSE(zero.isOk());
  CHECK(zero.status().message() ==
        "error: impossible --runtime-ngpus 0; expected a positive number of devices");
  o = dpOptions(2);
  o.microBatches = -1;
  CHECK_FALSE(plan::makePlan(g, o).isOk());
}

TEST_CASE("validatePlan rejects plans that do not fit the graph", "[plan]") {
  Graph g = linearGraph();
  proto::Plan good = *plan::makePlan(g, dpOptions(2));
  proto::Plan p = good;
  p.set_runtime_ngpus(3);
  p.set_plan_ngpus(2);
  CHECK(plan::validatePlan(p, g).message() ==
        "runtime_ngpus 3 is not a positive multiple of plan_ngpus 2");
  p = good;
  p.mutable_nodes()->RemoveLast();
  CHECK(plan::validatePlan(p, g).message() ==
        "the plan has 1 nodes but the graph has 2; was it made for another graph?");
  p = good;
  p.mutable_nodes(0)->set_devices(0, 1);
  CHECK(plan::validatePlan(p, g).message() ==
        "node 0 (aten::linear) is placed on device 1 outside 0..0");
  p = good;
  p.mutable_nodes(1)->set_stage(5);
  CHECK(plan::validatePlan(p, g).message() ==
        "node 1 (aten::sum) is in stage 5, which the plan does not declare");
}

TEST_CASE("validatePlan checks partitions against the annotations", "[plan]") {
  Graph g = linearGraph();
  proto::Plan p = *plan::makePlan(g, dpOptions(2));
  p.set_plan_ngpus(2);
  p.mutable_stages(0)->add_devices(1);
  auto *lin = p.mutable_nodes(0);
  lin->set_ident("n");
  lin->set_num(2);
  lin->add_devices(1);
  CHECK(plan::validatePlan(p, g).isOk());
  lin->set_ident("k"); // frozen (k^)
  CHECK_FALSE(plan::validatePlan(p, g).isOk());
  lin->set_ident("");
  lin->set_input(1); // weight dim 0 is n
  lin->set_dim(0);
  CHECK(plan::validatePlan(p, g).isOk());
  auto *sum = p.mutable_nodes(1);
  sum->set_num(2);
  sum->add_devices(1);
  CHECK(plan::validatePlan(p, g).message() ==
        "node 1 aten::sum at <top> (<unknown>): aten::sum is replicate-only (no partition "
        "annotation) but the plan "
        "splits it into 2");
}

TEST_CASE("memory estimate counts params, grads, AdamW states and saved activations", "[plan]") {
  Graph g = linearGraph();
  proto::Plan p = *plan::makePlan(g, dpOptions(2));
  auto mem = plan::estimateMemory(g, p);
  REQUIRE(mem.size() == 1);
  CHECK(mem[0].paramElements == 16 * 8 + 16 + 16); // weight, bias, unread buffer
  CHECK(mem[0].paramBytes == 160 * 4);
  CHECK(mem[0].gradBytes == 144 * 4);
  CHECK(mem[0].optimizerBytes == 144 * 8);
  CHECK(mem[0].activationBytes == 4 * 8 * 4);         // linear saves its input x
  CHECK(mem[0].transientBytes == (4 * 16 + 144) * 4); // its backward: dy, dW, db

  // Splitting the linear's n over two devices halves its weight and output.
  p.set_plan_ngpus(2);
  p.mutable_stages(0)->add_devices(1);
  p.mutable_nodes(0)->set_ident("n");
  p.mutable_nodes(0)->set_num(2);
  p.mutable_nodes(0)->add_devices(1);
  REQUIRE(plan::validatePlan(p, g).isOk());
  mem = plan::estimateMemory(g, p);
  REQUIRE(mem.size() == 2);
  CHECK(mem[1].paramElements == (16 * 8 + 16) / 2);
  CHECK(mem[1].activationBytes == 4 * 8 * 4); // x is read whole by each part
  CHECK(mem[0].paramElements == (16 * 8 + 16) / 2 + 16);
}

TEST_CASE("plans round-trip through plan.pb and print deterministically", "[plan]") {
  Graph g = linearGraph();
  proto::Plan p = *plan::makePlan(g, dpOptions(2));
  std::string path = (std::filesystem::temp_directory_path() / "nnsc-unit-plan.pb").string();
  REQUIRE(plan::writePlan(p, path).isOk());
  auto back = plan::readPlan(path);
  REQUIRE(back.isOk());
  CHECK(back->SerializeAsString() == p.SerializeAsString());
  std::ostringstream a, b;
  plan::printPlan(p, g, a);
  plan::printPlan(*back, g, b);
  CHECK(a.str() == b.str());
  CHECK(a.str().rfind("plan dp for Lin (2 nodes) from lin/graph.pb\n"
                      "  plan_ngpus 1, runtime_ngpus 2 (2 data-parallel copies), micro_batches 1, "
                      "zero 0\n",
                      0) == 0);
  CHECK(a.str().find("  device 0: params 640 B (160 elements), grads 576 B, optimizer 1.1 KiB, "
                     "activations 128 B, transient 832 B; total 3.2 KiB\n") != std::string::npos);
  CHECK(a.str().find("  0     aten::linear  %4       replicate  [0]      0      fc (Linear)\n") !=
        std::string::npos);
}

TEST_CASE("formatBytes uses binary units", "[plan]") {
  CHECK(plan::formatBytes(12) == "12 B");
  CHECK(plan::formatBytes(1536) == "1.5 KiB");
  CHECK(plan::formatBytes(25.0 * 1024 * 1024) == "25.0 MiB");
}

TEST_CASE("pipelined plans: stages per node and their checks", "[plan][pipeline]") {
  // linear (node 0) -> sum (node 1): stage 0 on device 0, stage 1 on device 1.
  Graph g = linearGraph();
  proto::Plan p = *plan::makePlan(g, dpOptions(1));
  p.set_plan_ngpus(2);
  p.set_runtime_ngpus(2);
  p.clear_stages();
  for (int s = 0; s < 2; ++s) {
    proto::Stage *st = p.add_stages();
    st->set_id(s);
    st->add_devices(s);
  }
  p.mutable_nodes(1)->set_stage(1);
  p.mutable_nodes(1)->set_devices(0, 1);
  CHECK(plan::validatePlan(p, g).isOk());
  CHECK(plan::physicalStages(p) == 2);
  proto::Plan backwards = p;
  backwards.mutable_nodes(0)->set_stage(1);
  backwards.mutable_nodes(0)->set_devices(0, 1);
  backwards.mutable_nodes(1)->set_stage(0);
  backwards.mutable_nodes(1)->set_devices(0, 0);
  CHECK_THAT(plan::validatePlan(backwards, g).message(),
             Catch::Matchers::ContainsSubstring("in stage 0 reads tensor %"));
  CHECK_THAT(plan::validatePlan(backwards, g).message(),
             Catch::Matchers::ContainsSubstring("in the later stage 1"));
  proto::Plan outside = p;
  outside.mutable_nodes(1)->set_devices(0, 0);
  CHECK(plan::validatePlan(outside, g).message() ==
        "node 1 (aten::sum) is in stage 1 but placed on device 0, which the stage does not hold");
  proto::Plan uneven = p;
  uneven.set_plan_ngpus(3);
  uneven.set_runtime_ngpus(3);
  uneven.mutable_stages(1)->add_devices(2);
  CHECK(plan::validatePlan(uneven, g).message() ==
        "stage 1 has 2 devices but stage 0 has 1; pipeline stages must be equally wide");
}

TEST_CASE("pipeline options are checked before any work", "[plan][pipeline]") {
  Graph g = linearGraph();
  plan::PlanOptions o = dpOptions(2);
  o.pipeline.stages = 2;
  o.policy = "autodist";
  CHECK_THAT(plan::makePlan(g, o).status().message(),
             Catch::Matchers::ContainsSubstring("policy 'autodist' takes --pipeline auto|S"));
  o.policy = "pp";
  // The graph has no numbered modules to cut at.
  CHECK_THAT(plan::makePlan(g, o).status().message(),
             Catch::Matchers::ContainsSubstring("the graph has no repeated modules"));
  o.pipeline.stages = 0;
  CHECK(plan::makePlan(g, o).status().message() ==
        "error: impossible --pipeline-stages 0; expected 1 to 1024");
}
