#include "../CatchCompat.h"

#include <cstring>

#include "nnsc/CodeGen/Program.h"
#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/Plan/Plan.h"

using namespace nnsc;
using namespace nnsc::ir;

namespace {

std::string bytesOf(double v) { return std::string(reinterpret_cast<const char *>(&v), 8); }
std::string bytesOf(float v) { return std::string(reinterpret_cast<const char *>(&v), 4); }

int64_t add(Graph &g, const char *name, Shape shape, DType dt, TensorKind kind,
            std::string data = {}) {
  return g.addTensor(
      {-1, name, std::move(shape), dt, kind == TensorKind::Param, kind, {}, std::move(data)});
}

// Covers every argument kind and the three ways constants are written.
Graph sampleGraph() {
  Graph g;
  g.name = "Sample";
  int64_t w = add(g, "w", {6, 4}, DType::Float32, TensorKind::Param);
  int64_t x = add(g, "x", {2, 4}, DType::Float32, TensorKind::Input);
  int64_t lab = add(g, "from", {2}, DType::Int64, TensorKind::Input); // a Python keyword
  int64_t half = add(g, "other", {}, DType::Float64, TensorKind::Constant, bytesOf(0.5));
  int64_t vec = add(g, "v", {3}, DType::Float32, TensorKind::Constant,
                    bytesOf(1.f) + bytesOf(2.f) + bytesOf(3.f));
  int64_t y = add(g, "y", {2, 6}, DType::Float32, TensorKind::Activation);
  int64_t s = add(g, "s", {2, 6}, DType::Float32, TensorKind::Activation);
  int64_t a = add(g, "a", {2, 3}, DType::Float32, TensorKind::Activation);
  int64_t b = add(g, "b", {2, 3}, DType::Float32, TensorKind::Activation);
  int64_t c = add(g, "c", {2, 3}, DType::Float32, TensorKind::Activation);
  int64_t li = add(g, "li", {2}, DType::Float64, TensorKind::Activation);
  int64_t r = add(g, "r", {3}, DType::Int64, TensorKind::Activation);
  int64_t v = add(g, "v", {2, 3}, DType::Float32, TensorKind::Activation);
  int64_t loss = add(g, "loss", {}, DType::Float32, TensorKind::Activation);
  auto node = [&](std::string op, std::vector<int64_t> in, std::vector<int64_t> out,
                  std::vector<Argument> args, std::string module) {
    Node n;
    n.op = std::move(op);
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.args = std::move(args);
    n.modulePath = std::move(module);
    n.loc = {"/src/model.py", 10 + static_cast<int>(g.nodes().size()), 0};
    g.addNode(std::move(n));
  };
  node("aten::linear", {x, w}, {y},
       {{"input", TensorRef{0}}, {"weight", TensorRef{1}}, {"bias", NoneValue{}}}, "fc");
  node("aten::mul", {y, half}, {s}, {{"self", TensorRef{0}}, {"other", TensorRef{1}}}, "fc");
  node("aten::split", {s}, {a, b},
       {{"self", TensorRef{0}}, {"split_size", int64_t{3}}, {"dim", int64_t{1}}}, "");
  node("aten::add", {a, vec}, {c},
       {{"self", TensorRef{0}}, {"other", TensorRef{1}}, {"alpha", int64_t{1}}}, "");
  node("aten::mul", {lab, half}, {li}, {{"self", TensorRef{0}}, {"other", TensorRef{1}}}, "");
  node("aten::arange", {}, {r},
       {{"end", int64_t{3}},
        {"dtype", DType::Int64},
        {"layout", NoneValue{}},
        {"device", DeviceValue{"cpu"}},
        {"pin_memory", false}},
       "");
  node("aten::view", {c}, {v}, {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{2, 3}}}, "");
  node("myops::loss", {v, b}, {loss},
       {{"x", TensorListRef{{0, 1}}},
        {"eps", 1e-05},
        {"cap", std::numeric_limits<double>::infinity()},
        {"mode", std::string("a\"b")},
        {"dims", std::vector<int64_t>{}},
        {"flags", std::vector<bool>{true, false}}},
       "head");
  g.inputs = {x, lab};
  g.outputs = {loss, r};
  g.lossOutput = 0;
  g.weightsWritten = true;
  return g;
}

proto::Plan dpPlan(const Graph &g, int ngpus) {
  plan::PlanOptions o;
  o.runtimeNgpus = ngpus;
  return *plan::makePlan(g, o);
}

} // namespace

TEST_CASE("rank layout: state first, then big constants, inputs renamed when reserved",
          "[codegen]") {
  Graph g = sampleGraph();
  auto layout = codegen::layoutRank(g, dpPlan(g, 3), 2);
  REQUIRE(layout.isOk());
  CHECK(layout->rank == 2);
  CHECK(layout->worldSize == 3);
  CHECK(layout->dpSize == 3);
  CHECK(layout->dpRank == 2);
  REQUIRE(layout->shards.size() == 2);
  CHECK(layout->shards[0].localName == "p0");
  CHECK(layout->shards[1].localName == "c4");
  CHECK(layout->shards[1].constant);
  CHECK(layout->shards[1].shape() == Shape{3});
  REQUIRE(layout->inputs.size() == 2);
  CHECK(layout->inputs[1].localName == "from_");
  CHECK(layout->nodes.size() == g.nodes().size());
}

TEST_CASE("layoutRank refuses ranks outside the job", "[codegen]") {
  Graph g = sampleGraph();
  auto layout = codegen::layoutRank(g, dpPlan(g, 2), 2);
  REQUIRE_FALSE(layout.isOk());
  CHECK(layout.status().message() == "error: rank 2 is outside 0..1");
}

TEST_CASE("program source: literals, constants, lists, keywords and multi-output calls",
          "[codegen]") {
  Graph g = sampleGraph();
  auto layout = codegen::layoutRank(g, dpPlan(g, 2), 1);
  REQUIRE(layout.isOk());
  auto src = codegen::emitProgram(g, *layout, {"dp", "g.pb"});
  REQUIRE(src.isOk());
  const std::string &s = *src;
  auto has = [&](const std::string &piece) {
    INFO(s);
    CHECK(s.find(piece) != std::string::npos);
  };
  has("# nnsc program: rank 1 of 2 (data-parallel copy 1 of 2), model Sample, plan dp\n");
  has("def forward(\n    p0: Tensor,  # w: float32[6, 4]\n"
      "    c4: Tensor,  # constant %4: float32[3]\n"
      "    x: Tensor,  # input: float32[2, 4], batch dim 0\n"
      "    from_: Tensor,  # input 'from': int64[2], batch dim 0\n"
      "    device: Device,\n) -> Tuple[Tensor, Tensor]:\n");
  has("    # fc /src/model.py:10\n    t5 = torch.linear(x, p0, bias=None)\n"
      "    # model.py:11\n    t6 = torch.mul(t5, 0.5)\n");
  has("\n    # <top> /src/model.py:12\n    r7 = torch.split(t6, split_size=3, dim=1)\n"
      "    t7 = r7[0]\n    t8 = r7[1]\n");
  has("    t9 = torch.add(t7, c4, alpha=1)\n");
  // int64 * 0-dim float64 promotes to float64: not the same as a Python float.
  has("    c3 = torch.full([], 0.5, dtype=7, layout=None, device=device, pin_memory=None)"
      "  # constant %3: float64[]\n    t10 = torch.mul(from_, c3)\n");
  has("    t11 = torch.arange(end=3, dtype=4, layout=None, device=device, pin_memory=False)"
      "  # dtype 4 = int64\n");
  has("    t12 = torch.reshape(t9, shape=[2, 3])\n");
  has("    t13 = myops.loss([t12, t8], eps=1e-05, cap=float('inf'), mode=\"a\\\"b\", dims=[], "
      "flags=[True, False])\n");
  has("\n    return (t13, t11)\n");
}
