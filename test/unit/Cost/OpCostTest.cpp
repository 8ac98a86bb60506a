// Op FLOP and byte counts against hand-computed values, and the op table's
// coverage of the op library.
#include "../CatchCompat.h"

#include "nnsc/Cost/OpCost.h"
#include "nnsc/Ops/OpRegistry.h"

using namespace nnsc;
using cost::OpShapes;
using cost::TensorInfo;
using ir::DType;

namespace {

TensorInfo act(ir::Shape s, bool grad = true, DType dt = DType::Float32) {
  return TensorInfo{std::move(s), dt, grad, false};
}
TensorInfo param(ir::Shape s) { return TensorInfo{std::move(s), DType::Float32, true, true}; }
TensorInfo index(ir::Shape s) { return TensorInfo{std::move(s), DType::Int64, false, false}; }

struct Part {
  ir::Node node;
  OpShapes shapes;
  Part(const std::string &op, std::vector<TensorInfo> in, std::vector<TensorInfo> out,
       std::vector<ir::Argument> args = {}) {
    node.op = op;
    node.args = std::move(args);
    shapes.node = &node;
    shapes.inputs = std::move(in);
    shapes.outputs = std::move(out);
  }
  cost::OpCost cost() {
    shapes.node = &node;
    return cost::opCost(shapes);
  }
};

} // namespace

TEST_CASE("every op of the op library has a cost class", "[cost]") {
  ops::OpRegistry registry = ops::OpRegistry::builtin();
  std::vector<std::string> missing;
  for (const std::string &op : registry.ops())
    if (!cost::costClassOf(op))
      missing.push_back(op);
  INFO("ops without a cost class: " << [&] {
    std::string s;
    for (const auto &m : missing)
      s += m + " ";
    return s;
  }());
  CHECK(missing.empty());
  CHECK(registry.ops().size() > 250);
  CHECK(cost::costClassOf("aten::add_") == cost::CostClass::Elementwise);
  CHECK(cost::costClassOf("aten::view") == cost::CostClass::View);
  CHECK_FALSE(cost::costClassOf("aten::no_such_op"));
}

TEST_CASE("linear: 2mnk forward, one GEMM per gradient backward", "[cost]") {
  // x [4, 8, 16] -> M = 32, k = 16; w [32, 16] -> n = 32; bias [32].
  Part p("aten::linear", {act({4, 8, 16}), param({32, 16}), param({32})}, {act({4, 8, 32})});
  cost::OpCost c = p.cost();
  CHECK(c.cls == cost::CostClass::Matmul);
  CHECK(c.forward.flops == 2.0 * 32 * 32 * 16 + 32 * 32);
  CHECK(c.forward.bytes == 2048 + 2048 + 128 + 4096);
  CHECK(c.forward.matmul);
  CHECK(c.backward.flops == 2 * 2.0 * 32 * 32 * 16 + 32 * 32);
  CHECK(c.backward.bytes == (4096 + 2048 + 2048) * 2 + 4096 + 128);
  CHECK(c.backward.kernels == 3);
  CHECK(c.saved.inputs == std::vector<int>{0, 1});
  // Input data needs no gradient: only the weight's GEMM (and the bias).
  p.shapes.inputs[0].needsGrad = false;
  c = p.cost();
  CHECK(c.backward.flops == 2.0 * 32 * 32 * 16 + 32 * 32);
  CHECK(c.saved.inputs == std::vector<int>{0});
}

TEST_CASE("matmul and bmm: 2 * numel(out) * k", "[cost]") {
  Part p("aten::matmul", {act({2, 3, 4, 5}), act({2, 3, 5, 6})}, {act({2, 3, 4, 6})});
  cost::OpCost c = p.cost();
  CHECK(c.forward.flops == 2.0 * 144 * 5);
  CHECK(c.backward.flops == 2 * 2.0 * 144 * 5);
  Part bmm("aten::bmm", {act({8, 16, 32}, false), act({8, 32, 4})}, {act({8, 16, 4})});
  c = bmm.cost();
  CHECK(c.forward.flops == 2.0 * 8 * 16 * 4 * 32);
  CHECK(c.backward.flops == 2.0 * 8 * 16 * 4 * 32);
  CHECK(c.saved.inputs == std::vector<int>{0});
  // Both operands batched: the per-batch product's smallest dim (m 16, k 32, n 4).
  CHECK(c.forward.batchedDim == 4);
  CHECK(c.backward.batchedDim == 4);
  Part scores("aten::matmul", {act({2, 3, 4, 5}), act({2, 3, 5, 6})}, {act({2, 3, 4, 6})});
  CHECK(scores.cost().forward.batchedDim == 4);
  // A weight (rank 2) is one large GEMM, whatever the input's batch dims.
  Part lin("aten::matmul", {act({2, 3, 4, 5}), act({5, 6})}, {act({2, 3, 4, 6})});
  CHECK(lin.cost().forward.batchedDim == 0);
}

TEST_CASE("attention: QK^T, softmax, PV; backward 2.5x the matmuls; causal halves", "[cost]") {
  // q, k, v [2, 4, 8, 16]: B = 8, L = S = 8, E = 16.
  std::vector<TensorInfo> in = {act({2, 4, 8, 16}), act({2, 4, 8, 16}), act({2, 4, 8, 16})};
  Part p("aten::scaled_dot_product_attention", in, {act({2, 4, 8, 16})}, {{"is_causal", false}});
  cost::OpCost c = p.cost();
  double mm = 2.0 * 8 * 8 * 8 * (16 + 16), scores = 8 * 8 * 8;
  CHECK(c.forward.flops == mm + 5 * scores);
  CHECK(c.backward.flops == 2.5 * mm + 4 * scores);
  CHECK(c.forward.bytes == 4 * 4096 + 8 * 8 * 4);
  CHECK(c.saved.inputs == std::vector<int>{0, 1, 2});
  CHECK(c.saved.outputs == std::vector<int>{0});
  CHECK(c.saved.extraBytes == 8 * 8 * 4);
  Part causal("aten::scaled_dot_product_attention", in, {act({2, 4, 8, 16})},
              {{"is_causal", true}});
  CHECK(causal.cost().forward.flops == (mm + 5 * scores) / 2);
}

TEST_CASE("conv: 2 * N * out positions * numel(weight); groups and stride by shape", "[cost]") {
  Part p("aten::conv2d", {act({2, 3, 8, 8}, false), param({4, 3, 3, 3}), param({4})},
         {act({2, 4, 6, 6})});
  cost::OpCost c = p.cost();
  CHECK(c.cls == cost::CostClass::Conv);
  CHECK(c.forward.flops == 2.0 * 2 * 36 * 108 + 288);
  CHECK(c.backward.flops == 2.0 * 2 * 36 * 108 + 288); // weight and bias grads only
  Part groups("aten::conv2d", {act({2, 4, 8, 8}), param({4, 1, 3, 3})}, {act({2, 4, 6, 6})});
  CHECK(groups.cost().forward.flops == 2.0 * 2 * 36 * 36);
  CHECK(groups.cost().backward.flops == 2 * 2.0 * 2 * 36 * 36);
  Part strided("aten::conv2d", {act({2, 3, 8, 8}), param({4, 3, 3, 3})}, {act({2, 4, 3, 3})});
  CHECK(strided.cost().forward.flops == 2.0 * 2 * 9 * 108);
  Part conv1d("aten::conv1d", {act({1, 2, 10}), param({3, 2, 4})}, {act({1, 3, 7})});
  CHECK(conv1d.cost().forward.flops == 2.0 * 7 * 24);
}

TEST_CASE("layer_norm: 8 per element forward, 12 + weight/bias backward, saves stats", "[cost]") {
  Part p("aten::layer_norm", {act({4, 10, 32}), param({32}), param({32})}, {act({4, 10, 32})},
         {{"normalized_shape", std::vector<int64_t>{32}}});
  cost::OpCost c = p.cost();
  double n = 1280, stats = 40 * 2 * 4;
  CHECK(c.forward.flops == 8 * n);
  CHECK(c.forward.bytes == 5120 + 128 + 128 + 5120 + stats);
  CHECK(c.backward.flops == 12 * n + 2 * 2 * n);
  CHECK(c.saved.inputs == std::vector<int>{0});
  CHECK(c.saved.extraBytes == stats);
}

TEST_CASE("embedding: gather forward; zero + index_add backward", "[cost]") {
  Part p("aten::embedding", {param({100, 16}), index({4, 8})}, {act({4, 8, 16})});
  cost::OpCost c = p.cost();
  CHECK(c.forward.flops == 0);
  CHECK(c.forward.bytes == 2 * 2048 + 256);
  CHECK(c.backward.flops == 512);
  CHECK(c.backward.bytes == 6400 + 2048 + 256 + 2 * 2048);
  CHECK(c.backward.kernels == 2);
  CHECK(c.saved.inputs == std::vector<int>{1});
}

TEST_CASE("cross_entropy: log_softmax + nll forward and backward", "[cost]") {
  Part p("aten::cross_entropy_loss", {act({8, 10}), index({8})}, {act({})});
  cost::OpCost c = p.cost();
  CHECK(c.forward.flops == 5 * 80 + 2 * 8);
  CHECK(c.forward.bytes == 3 * 320 + 64 + 4);
  CHECK(c.backward.flops == 4 * 80 + 8);
  CHECK(c.backward.bytes == 4 * 320 + 64);
  CHECK(c.saved.extraBytes == 320); // the log-probabilities
  CHECK(c.saved.inputs == std::vector<int>{1});
}

TEST_CASE("saved tensors per op class", "[cost]") {
  auto saved = [](const std::string &op, std::vector<TensorInfo> in) {
    Part p(op, std::move(in), {act({4, 8})});
    return p.cost().saved;
  };
  CHECK(saved("aten::relu", {act({4, 8})}).outputs == std::vector<int>{0});
  CHECK(saved("aten::relu", {act({4, 8})}).inputs.empty());
  CHECK(saved("aten::gelu", {act({4, 8})}).inputs == std::vector<int>{0});
  CHECK(saved("aten::dropout", {act({4, 8})}).extraBytes == 32); // a byte mask
  CHECK(saved("aten::softmax", {act({4, 8})}).outputs == std::vector<int>{0});
  CHECK(saved("aten::add", {act({4, 8}), act({4, 8})}).inputs.empty());
  CHECK(saved("aten::mul", {act({4, 8}), act({4, 8})}).inputs == std::vector<int>{0, 1});
  // A product keeps an operand only for the other's gradient: times a Python
  // scalar (attention's 1/sqrt(d)) nothing, times a frozen tensor the tensor.
  CHECK(saved("aten::mul", {act({4, 8})}).inputs.empty());
  CHECK(saved("aten::div", {act({4, 8})}).inputs.empty());
  CHECK(saved("aten::mul", {act({4, 8}), act({4, 8}, false)}).inputs == std::vector<int>{1});
  CHECK(saved("aten::div", {act({4, 8}, false), act({4, 8})}).inputs == std::vector<int>{0, 1});
  CHECK(saved("aten::view", {act({32})}).inputs.empty());
  // No gradient flows: nothing is saved and there is no backward.
  Part frozen("aten::gelu", {act({4, 8}, false)}, {act({4, 8}, false)});
  CHECK(frozen.cost().saved.inputs.empty());
  CHECK(frozen.cost().backward.kernels == 0);
}

TEST_CASE("views move nothing; copies move their bytes", "[cost]") {
  Part view("aten::permute", {act({4, 8})}, {act({8, 4})});
  CHECK(view.cost().forward.bytes == 0);
  CHECK(view.cost().backward.bytes == 0);
  Part copy("aten::contiguous", {act({4, 8})}, {act({4, 8})});
  CHECK(copy.cost().forward.bytes == 256);
  CHECK(copy.cost().forward.flops == 0);
  Part cat("aten::cat", {act({4, 8}), act({4, 8})}, {act({8, 8})});
  CHECK(cat.cost().forward.bytes == 512);
}

TEST_CASE("workSeconds is the roofline plus the launch floor", "[cost]") {
  cost::DeviceSpec d;
  d.flops = {{"float32", 1e12}, {"bfloat16", 4e12}};
  d.memoryBandwidth = 1e11;
  d.launchFloor = 1e-6;
  d.matmulEfficiency = 0.5;
  d.memoryEfficiency = 0.5;
  cost::Work mm{4e9, 1e6, 1, true};
  CHECK(cost::workSeconds(mm, DType::BFloat16, d) == Catch::Approx(4e9 / 2e12 + 1e-6));
  CHECK(cost::workSeconds(mm, DType::Float32, d) == Catch::Approx(4e9 / 5e11 + 1e-6));
  cost::Work mem{1e3, 1e9, 2, false};
  CHECK(cost::workSeconds(mem, DType::BFloat16, d) == Catch::Approx(1e9 / 5e10 + 2e-6));
  CHECK(cost::workSeconds(cost::Work{}, DType::Float32, d) == 0);
  // Random draws bound an op where the spec has a rate (a CPU), not elsewhere.
  cost::Work draws{1e3, 1e3, 1, false, 1e8};
  CHECK(cost::workSeconds(draws, DType::Float32, d) == Catch::Approx(1e3 / 5e10 + 1e-6));
  d.randomRate = 1e8;
  CHECK(cost::workSeconds(draws, DType::Float32, d) == Catch::Approx(1.0 + 1e-6));
  // A batched product runs at its smallest dim's fraction of the matmul rate.
  d.batchedMatmul = {{32, 0.25}, {128, 0.75}};
  cost::Work batched = mm;
  batched.batchedDim = 64; // halfway in log2: 0.5
  CHECK(cost::workSeconds(batched, DType::Float32, d) == Catch::Approx(4e9 / 2.5e11 + 1e-6));
  CHECK(cost::workSeconds(mm, DType::Float32, d) == Catch::Approx(4e9 / 5e11 + 1e-6));
}

TEST_CASE("dropout and random fills draw one number per output element", "[cost]") {
  Part drop("aten::dropout", {act({4, 8})}, {act({4, 8})});
  CHECK(drop.cost().forward.randomDraws == 32);
  CHECK(drop.cost().saved.maskElements == 32);
  Part rand("aten::rand_like", {act({4, 8}, false)}, {act({4, 8}, false)});
  CHECK(rand.cost().forward.randomDraws == 32);
  Part relu("aten::relu", {act({4, 8})}, {act({4, 8})});
  CHECK(relu.cost().forward.randomDraws == 0);
}

TEST_CASE("vector-bound ops: kind, elements and rows; priced where the spec lists the kind",
          "[cost]") {
  // gelu: an elementwise kind, no rows; forward and backward both tagged.
  Part gelu("aten::gelu", {act({4, 8, 16})}, {act({4, 8, 16})});
  cost::OpCost g = gelu.cost();
  REQUIRE(g.forward.vectorKind != nullptr);
  CHECK(std::string(g.forward.vectorKind) == "gelu");
  CHECK(g.forward.elements == 512);
  CHECK(g.forward.rows == 0);
  CHECK(!g.forward.backward);
  CHECK(g.backward.backward);
  CHECK(g.backward.elements == 512);
  // softmax over the last dim of [2, 3, 16]: 6 rows of 16.
  Part sm("aten::softmax", {act({2, 3, 16})}, {act({2, 3, 16})}, {{"dim", int64_t(-1)}});
  CHECK(std::string(sm.cost().forward.vectorKind) == "softmax");
  CHECK(sm.cost().forward.rows == 6);
  // softmax over dim 1: 2 * 16 rows of 3.
  Part sm1("aten::softmax", {act({2, 3, 16})}, {act({2, 3, 16})}, {{"dim", int64_t(1)}});
  CHECK(sm1.cost().forward.rows == 32);
  // layer_norm over the last 32: 40 rows; cross_entropy [8, 10]: 8 rows of 10.
  Part ln("aten::layer_norm", {act({4, 10, 32}), param({32}), param({32})}, {act({4, 10, 32})},
          {{"normalized_shape", std::vector<int64_t>{32}}});
  CHECK(std::string(ln.cost().forward.vectorKind) == "norm");
  CHECK(ln.cost().forward.rows == 40);
  Part ce("aten::cross_entropy_loss", {act({8, 10}), index({8})}, {act({})});
  CHECK(std::string(ce.cost().forward.vectorKind) == "loss");
  CHECK(ce.cost().forward.rows == 8);
  CHECK(ce.cost().forward.elements == 80);
  // add and nll_loss are not vector-bound kinds: their bytes price them.
  Part add("aten::add", {act({4, 8}), act({4, 8})}, {act({4, 8})});
  CHECK(add.cost().forward.vectorKind == nullptr);
  Part nll("aten::nll_loss", {act({8, 10}), index({8})}, {act({})});
  CHECK(nll.cost().forward.vectorKind == nullptr);

  cost::DeviceSpec d;
  d.flops = {{"float32", 1e12}};
  d.memoryBandwidth = 1e11;
  d.launchFloor = 1e-6;
  cost::OpCost c = ce.cost();
  double roofline = cost::workSeconds(c.forward, DType::Float32, d);
  d.vectorOps["loss"] = {1e-9, 1e-6, 2e-9, 0};
  // Forward: 80 elements x 1 ns + 8 rows x 1 us over the roofline's max, plus the floors.
  CHECK(cost::workSeconds(c.forward, DType::Float32, d) ==
        Catch::Approx(std::max(roofline - 2e-6, 80 * 1e-9 + 8 * 1e-6) + 2e-6));
  CHECK(cost::workSeconds(c.backward, DType::Float32, d) ==
        Catch::Approx(std::max(c.backward.bytes / 1e11, 80 * 2e-9) + 2e-6));
  // A kind the spec does not list: the roofline alone.
  d.vectorOps.clear();
  d.vectorOps["gelu"] = {1.0, 0, 1.0, 0};
  CHECK(cost::workSeconds(c.forward, DType::Float32, d) == Catch::Approx(roofline));
}
