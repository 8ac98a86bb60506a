// The graph in mixed precision's dtypes (cost::atPrecision) and what the cost
// model reads from it: 16-bit activations and weights, float32 losses,
// explicit casts kept.
#include "../CatchCompat.h"

#include "../Plan/HandGraphs.h"
#include "nnsc/Cost/Memory.h"
#include "nnsc/Cost/OpCost.h"
#include "nnsc/Cost/PrecisionView.h"

using namespace nnsc;
using nnsc::testgraphs::Builder;

namespace {

using ir::DType;

// A tiny language model: tokens -> embedding -> linear -> (cast to float32
// and back, as an RMSNorm does) -> lm head -> cross_entropy, plus a float32
// constant made inside (zeros with dtype=) and a log_softmax + nll_loss pair.
struct Lm {
  Builder b;
  int64_t tokens, wte, w, head, emb, h, up, back, logits, loss, logp, nll, zeros, mixed, norm,
      fromFloat32;
  Lm() {
    tokens = b.input("idx", {4, 8}, DType::Int64);
    int64_t target = b.input("targets", {32}, DType::Int64);
    wte = b.param("wte.weight", {50, 16});
    w = b.param("fc.weight", {16, 16});
    head = b.param("head.weight", {50, 16});
    emb = b.op("aten::embedding", {wte, tokens}, {4, 8, 16}, "");
    h = b.op("aten::linear", {emb, w}, {4, 8, 16}, "");
    up = b.op("aten::to", {h}, {4, 8, 16}, "");
    withDType(DType::Float32);
    norm = b.op("aten::mul", {up, up}, {4, 8, 16}, "");
    back = b.op("aten::type_as", {norm, h}, {4, 8, 16}, "");
    int64_t flat = b.op("aten::view", {back}, {32, 16}, "");
    logits = b.op("aten::linear", {flat, head}, {32, 50}, "");
    loss = b.op("aten::cross_entropy_loss", {logits, target}, {}, "");
    logp = b.op("aten::log_softmax", {logits}, {32, 50}, "");
    nll = b.op("aten::nll_loss", {logp, target}, {}, "");
    zeros = b.op("aten::zeros", {}, {32, 50}, "");
    withDType(DType::Float32);
    mixed = b.op("aten::add", {logits, zeros}, {32, 50}, "");
    fromFloat32 = b.op("aten::linear", {norm, w}, {4, 8, 16}, "");
    b.loss(loss);
  }
  /// Gives the last node an explicit dtype argument.
  void withDType(DType dtype) { b.graph.nodes().back().args.push_back({"dtype", dtype}); }
  DType at(const ir::Graph &g, int64_t t) const { return g.tensor(t).dtype; }
};

cost::OpShapes shapesOf(const ir::Graph &g, const ir::Node &node) {
  cost::OpShapes s;
  s.node = &node;
  for (int64_t t : node.inputs)
    s.inputs.push_back({g.tensor(t).shape, g.tensor(t).dtype, true, false});
  for (int64_t t : node.outputs)
    s.outputs.push_back({g.tensor(t).shape, g.tensor(t).dtype, true, false});
  return s;
}

} // namespace

TEST_CASE("mixed precision's dtypes: 16-bit activations, float32 losses and casts",
          "[cost][precision]") {
  Lm lm;
  ir::Graph v = cost::atPrecision(lm.b.graph, cost::Precision::BFloat16);
  REQUIRE(v.nodes().size() == lm.b.graph.nodes().size());
  CHECK(lm.at(v, lm.tokens) == DType::Int64);
  for (int64_t t : {lm.wte, lm.w, lm.head, lm.emb, lm.h, lm.back, lm.logits})
    CHECK(lm.at(v, t) == DType::BFloat16);
  CHECK(lm.at(v, lm.up) == DType::Float32);   // x.to(torch.float32)
  CHECK(lm.at(v, lm.norm) == DType::Float32); // computed on the float32 copy
  CHECK(lm.at(v, lm.loss) == DType::Float32); // cross_entropy on upcast logits
  CHECK(lm.at(v, lm.logp) == DType::Float32); // log_softmax that only feeds nll_loss
  CHECK(lm.at(v, lm.nll) == DType::Float32);
  CHECK(lm.at(v, lm.zeros) == DType::Float32); // zeros(dtype=torch.float32)
  CHECK(lm.at(v, lm.mixed) == DType::Float32); // bf16 + float32 promotes
  // A matmul casts its float32 inputs down (Program::computeMatmulsIn).
  CHECK(lm.at(v, lm.fromFloat32) == DType::BFloat16);

  ir::Graph half = cost::atPrecision(lm.b.graph, cost::Precision::Float16);
  CHECK(lm.at(half, lm.logits) == DType::Float16);
  ir::Graph same = cost::atPrecision(lm.b.graph, cost::Precision::Float32);
  CHECK(lm.at(same, lm.logits) == DType::Float32);
  CHECK(lm.at(lm.b.graph, lm.logits) == DType::Float32); // the original is untouched
}

TEST_CASE("a log_softmax read by something other than a loss stays 16-bit", "[cost][precision]") {
  Builder b;
  int64_t x = b.input("x", {4, 10});
  int64_t logp = b.op("aten::log_softmax", {x}, {4, 10}, "");
  int64_t y = b.op("aten::exp", {logp}, {4, 10}, "");
  b.loss(y);
  ir::Graph v = cost::atPrecision(b.graph, cost::Precision::BFloat16);
  CHECK(v.tensor(x).dtype == DType::BFloat16);
  CHECK(v.tensor(logp).dtype == DType::BFloat16);
  CHECK(v.tensor(y).dtype == DType::BFloat16);
}

TEST_CASE("a cross-entropy in the view saves float32 log-probabilities", "[cost][precision]") {
  Lm lm;
  ir::Graph fp32 = lm.b.graph;
  ir::Graph bf16 = cost::atPrecision(fp32, cost::Precision::BFloat16);
  const ir::Node &node = fp32.nodes()[7];
  REQUIRE(node.op == "aten::cross_entropy_loss");
  cost::OpCost full = cost::opCost(shapesOf(fp32, node));
  cost::OpCost mixed = cost::opCost(shapesOf(bf16, bf16.nodes()[7]));
  const double logits = 32 * 50;
  CHECK(full.saved.extraBytes == 4 * logits);
  CHECK(mixed.saved.extraBytes == 4 * logits); // float32 although the logits are bf16
  // The upcast copy: read 2 bytes and write 4 per logit on top.
  CHECK(mixed.forward.bytes == full.forward.bytes + 6 * logits);

  const ir::Node &head = bf16.nodes()[6];
  REQUIRE(head.op == "aten::linear");
  cost::OpCost lowHead = cost::opCost(shapesOf(bf16, head));
  cost::OpCost fullHead = cost::opCost(shapesOf(fp32, fp32.nodes()[6]));
  CHECK(lowHead.forward.flops == fullHead.forward.flops);
  CHECK(lowHead.forward.bytes == fullHead.forward.bytes / 2);
}

TEST_CASE("a cast into the dtype a tensor has costs nothing", "[cost][precision]") {
  Lm lm;
  ir::Graph fp32 = lm.b.graph;
  const ir::Node &up = fp32.nodes()[2];
  REQUIRE(up.op == "aten::to");
  cost::OpCost same = cost::opCost(shapesOf(fp32, up));
  CHECK(same.forward.bytes == 0);
  CHECK(same.forward.kernels == 0);
  ir::Graph bf16 = cost::atPrecision(fp32, cost::Precision::BFloat16);
  cost::OpCost converts = cost::opCost(shapesOf(bf16, bf16.nodes()[2]));
  CHECK(converts.forward.bytes == (2 + 4) * 4 * 8 * 16); // read bf16, write float32
}

TEST_CASE("precision names", "[cost][precision]") {
  CHECK(*cost::parsePrecision("bf16") == cost::Precision::BFloat16);
  CHECK(*cost::parsePrecision("mixed") == cost::Precision::BFloat16);
  CHECK(*cost::parsePrecision("fp16") == cost::Precision::Float16);
  CHECK(*cost::parsePrecision("fp32") == cost::Precision::Float32);
  auto bad = cost::parsePrecision("fp8");
  REQUIRE(!bad);
  CHECK(bad.status().message() ==
        "error: unknown precision 'fp8'; expected one of: fp32, bf16, fp16 (mixed: bf16)");
  CHECK(std::string(cost::precisionName(cost::Precision::Float16)) == "fp16");
}
