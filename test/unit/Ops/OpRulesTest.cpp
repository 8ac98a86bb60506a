// The built-in op rules: exact annotations for small hand-built nodes, each
// checked against the node's shapes by annotateGraph; user YAML loading.
#include "../CatchCompat.h"

#include <filesystem>
#include <fstream>

#include "nnsc/Ops/OpRegistry.h"

using namespace nnsc;
using ir::Argument;
using ir::Shape;

namespace {

using Args = std::vector<Argument>;

const ops::OpRegistry &registry() {
  static const ops::OpRegistry r = ops::OpRegistry::builtin();
  return r;
}

ir::Tensor tensorOf(const Shape &shape) {
  ir::Tensor t;
  t.shape = shape;
  return t;
}

/// Appends a node `op` with fresh tensors of the given shapes to `g`.
void addNode(ir::Graph &g, const std::string &op, const std::vector<Shape> &ins,
             const std::vector<Shape> &outs, Args args = {}, int line = 1) {
  ir::Node n;
  n.op = op;
  n.loc = {"model.py", line, 1};
  for (const Shape &s : ins)
    n.inputs.push_back(g.addTensor(tensorOf(s)));
  for (const Shape &s : outs)
    n.outputs.push_back(g.addTensor(tensorOf(s)));
  n.args = std::move(args);
  g.addNode(std::move(n));
}

/// The annotations annotateGraph gives one node (so each is checked against
/// the shapes); "" when the node is left replicate-only.
std::string annotate(const std::string &op, const std::vector<Shape> &ins,
                     const std::vector<Shape> &outs, Args args = {}) {
  ir::Graph g;
  addNode(g, op, ins, outs, std::move(args));
  auto missing = ops::annotateGraph(g, registry());
  INFO(op << ": " << (missing ? "" : missing.status().message()));
  REQUIRE(missing.isOk());
  std::string out;
  for (const std::string &a : g.nodes()[0].annotations)
    out += (out.empty() ? "" : " | ") + a;
  return out;
}

/// annotate() with the node's first output as the graph's loss.
std::string annotateLoss(const std::string &op, const std::vector<Shape> &ins, Args args) {
  ir::Graph g;
  addNode(g, op, ins, {{}}, std::move(args));
  g.outputs = {g.nodes()[0].outputs[0]};
  g.lossOutput = 0;
  auto missing = ops::annotateGraph(g, registry());
  INFO(op << ": " << (missing ? "" : missing.status().message()));
  REQUIRE(missing.isOk());
  REQUIRE(g.nodes()[0].annotations.size() == 1);
  return g.nodes()[0].annotations[0];
}

Argument arg(std::string name, ir::ArgValue v) { return Argument{std::move(name), std::move(v)}; }
Argument dims(std::string name, std::vector<int64_t> v) { return arg(std::move(name), v); }
Argument i64(std::string name, int64_t v) { return arg(std::move(name), v); }

} // namespace

TEST_CASE("linear and matrix products", "[ops][rules]") {
  CHECK(annotate("aten::linear", {{8, 256, 384}, {1152, 384}}, {{8, 256, 1152}}) ==
        "* k+, n k+ -> * n");
  // A bias is an addend: cut along k, one part adds it (row-parallel linear).
  CHECK(annotate("aten::linear", {{8, 384}, {64, 384}, {64}}, {{8, 64}}) ==
        "* k+, n k+, +n -> * n");
  CHECK(annotate("aten::linear", {{2, 8, 384}, {64, 384}, {64}}, {{2, 8, 64}}) ==
        "* k+, n k+, +n -> * n");
  CHECK(annotate("aten::linear", {{8, 384}, {64, 384}, {1}}, {{8, 64}}) == "* k+, n k+, +1 -> * n");
  CHECK(annotate("aten::linear", {{8, 384}, {64, 384}, {}}, {{8, 64}}) == "* k+, n k+, +() -> * n");
  CHECK(annotate("aten::linear", {{8, 384}, {64, 384}, {8, 64}}, {{8, 64}}).empty());
  CHECK(annotate("aten::matmul", {{8, 6, 256, 64}, {8, 6, 64, 256}}, {{8, 6, 256, 256}}) ==
        "a b m k+, a b k+ n -> a b m n");
  CHECK(annotate("aten::matmul", {{8, 6, 256, 64}, {64, 32}}, {{8, 6, 256, 32}}) ==
        "a b m k+, k+ n -> a b m n");
  CHECK(annotate("aten::matmul", {{1, 6, 4, 8}, {5, 6, 8, 3}}, {{5, 6, 4, 3}}) ==
        "1 b m k+, a b k+ n -> a b m n");
  CHECK(annotate("aten::matmul", {{8}, {8, 3}}, {{3}}) == "k+, k+ n -> n");
  CHECK(annotate("aten::matmul", {{8}, {8}}, {{}}) == "k+, k+ -> ?");
  CHECK(annotate("aten::mm", {{4, 8}, {8, 3}}, {{4, 3}}) == "m k+, k+ n -> m n");
  CHECK(annotate("aten::bmm", {{2, 4, 8}, {2, 8, 3}}, {{2, 4, 3}}) == "a m k+, a k+ n -> a m n");
  CHECK(annotate("aten::baddbmm", {{1, 4, 3}, {2, 4, 8}, {2, 8, 3}}, {{2, 4, 3}}) ==
        "+1 m n, a m k+, a k+ n -> a m n");
  CHECK(annotate("aten::addmm", {{3}, {4, 8}, {8, 3}}, {{4, 3}}) == "+n, m k+, k+ n -> m n");
  CHECK(annotate("aten::addmm", {{}, {4, 8}, {8, 3}}, {{4, 3}}) == "+(), m k+, k+ n -> m n");
  CHECK(annotate("aten::addmv", {{4}, {4, 8}, {8}}, {{4}}) == "+m, m k+, k+ -> m");
  CHECK(annotate("aten::outer", {{4}, {3}}, {{4, 3}}) == "a, b -> a b");
}

TEST_CASE("einsum is read off its equation", "[ops][rules]") {
  CHECK(annotate("aten::einsum", {{2, 6, 16, 8}, {2, 6, 32, 8}}, {{2, 6, 16, 32}},
                 {arg("equation", std::string("bhqd,bhkd->bhqk"))}) ==
        "b h q d+, b h k d+ -> b h q k");
  CHECK(annotate("aten::einsum", {{4, 5}, {5, 6}}, {{4, 6}},
                 {arg("equation", std::string("ij,jk"))}) == "i j+, j+ k -> i k");
  CHECK(annotate("aten::einsum", {{2, 3, 4, 5}, {1, 5, 6}}, {{2, 3, 4, 6}},
                 {arg("equation", std::string("...ij,...jk->...ik"))}) ==
        "a b i j+, 1 j+ k -> a b i k");
  CHECK(annotate("aten::einsum", {{3, 3}}, {{3}}, {arg("equation", std::string("ii->i"))}) == "");
}

TEST_CASE("elementwise ops broadcast", "[ops][rules]") {
  CHECK(annotate("aten::add", {{8, 256, 384}, {384}}, {{8, 256, 384}}) == "a b c, c -> a b c");
  CHECK(annotate("aten::add", {{4, 1, 5}, {3, 1}}, {{4, 3, 5}}) == "a 1 c, b 1 -> a b c");
  CHECK(annotate("aten::mul", {{8, 6}, {}}, {{8, 6}}) == "a b, ? -> a b");
  CHECK(annotate("aten::mul", {{8, 6}}, {{8, 6}}, {arg("other", 0.5)}) == "a b -> a b");
  CHECK(annotate("aten::eq", {{1, 1, 32, 32}, {}}, {{1, 1, 32, 32}}) == "a b c d, ? -> a b c d");
  CHECK(annotate("aten::masked_fill", {{8, 6, 32, 32}, {1, 1, 32, 32}}, {{8, 6, 32, 32}}) ==
        "a b c d, 1 1 c d -> a b c d");
  CHECK(annotate("aten::where", {{4, 1}, {4, 5}, {}}, {{4, 5}}) == "a 1, a b, ? -> a b");
  CHECK(annotate("aten::pow", {{2, 3}}, {{2, 3}}, {arg("exponent", 2.0)}) == "a b -> a b");
  for (const char *op : {"aten::neg", "aten::rsqrt", "aten::gelu", "aten::silu", "aten::exp",
                         "aten::relu_", "aten::contiguous", "aten::dropout", "aten::ones_like"})
    CHECK(annotate(op, {{2, 3}}, {{2, 3}}) == "a b -> a b");
  CHECK(annotate("aten::native_dropout", {{2, 3}}, {{2, 3}, {2, 3}}) == "a b -> a b, a b");
  CHECK(annotate("aten::type_as", {{2, 3}, {2, 3}}, {{2, 3}}) == "a b, a b -> a b");
  CHECK(annotate("aten::to", {{2, 3}, {7}}, {{2, 3}}) == "a b, ? -> a b");
  CHECK(annotate("aten::mul", {{}, {}}, {{}}) == "?, ? -> ?");
}

TEST_CASE("reductions and ops along a dim", "[ops][rules]") {
  CHECK(annotate("aten::softmax", {{8, 6, 32, 32}}, {{8, 6, 32, 32}}, {i64("dim", -1)}) ==
        "a b c d^ -> a b c d^");
  CHECK(annotate("aten::sum", {{2, 3, 4}}, {{2, 1, 4}}, {dims("dim", {1}), arg("keepdim", true)}) ==
        "a b+ c -> a 1 c");
  CHECK(annotate("aten::sum", {{2, 3}}, {{}}) == "a+ b+ -> ?");
  CHECK(annotate("aten::mean", {{2, 3, 4}}, {{2, 3, 1}},
                 {dims("dim", {-1}), arg("keepdim", true)}) == "a b c^ -> a b 1");
  CHECK(annotate("aten::mean", {{2, 3}}, {{2}}, {dims("dim", {1}), arg("keepdim", false)}) ==
        "a b^ -> a");
  CHECK(annotate("aten::max", {{2, 3}}, {{2}, {2}}, {i64("dim", 1)}) == "a b^ -> a, a");
  CHECK(annotate("aten::max", {{2, 3}, {3}}, {{2, 3}}) == "a b, b -> a b");
  CHECK(annotate("aten::amax", {{2, 3}}, {{2}}, {dims("dim", {-1})}) == "a b^ -> a");
  CHECK(annotate("aten::argmax", {{2, 3}}, {{}}, {arg("dim", ir::NoneValue{})}) == "a^ b^ -> ?");
  CHECK(annotate("aten::var", {{2, 3}}, {{2, 1}}, {dims("dim", {1}), arg("keepdim", true)}) ==
        "a b^ -> a 1");
  CHECK(annotate("aten::cumsum", {{2, 3}}, {{2, 3}}, {i64("dim", 0)}) == "a^ b -> a^ b");
  CHECK(annotate("aten::topk", {{2, 10}}, {{2, 3}, {2, 3}}, {i64("k", 3), i64("dim", -1)}) ==
        "a b^ -> a 3, a 3");
}

TEST_CASE("view and reshape derive merged dims", "[ops][rules]") {
  CHECK(annotate("aten::view", {{8, 256, 384}}, {{8, 256, 6, 64}}) == "a b (c d) -> a b c d");
  CHECK(annotate("aten::view", {{8, 256, 6, 64}}, {{8, 256, 384}}) == "a b c d -> a b (c d)");
  CHECK(annotate("aten::view", {{8, 256, 65}}, {{2048, 65}}) == "a b c -> (a b) c");
  CHECK(annotate("aten::reshape", {{2, 32, 2, 2, 16}}, {{2, 32, 4, 16}}) ==
        "a b c d e -> a b (c d) e");
  CHECK(annotate("aten::reshape", {{2, 16, 32, 32}}, {{1, 32, 32, 32}}) ==
        "a b c d -> 1 (a b) c d");
  CHECK(annotate("aten::view", {{4, 6}}, {{3, 8}}) == "4 6 -> 3 8");
  CHECK(annotate("aten::view", {{1, 5}}, {{5, 1}}) == "1 a -> a 1");
  // A batch of 1 takes up the name a batch of 8 has: `c` is the heads either way.
  CHECK(annotate("aten::view", {{1, 256, 384}}, {{1, 256, 6, 64}}) == "1 b (c d) -> 1 b c d");
  CHECK(annotate("aten::view", {{1, 256, 6, 64}}, {{1, 256, 384}}) == "1 b c d -> 1 b (c d)");
  CHECK(annotate("aten::view", {{384}}, {{6, 1, 64}}) == "(a 1 c) -> a 1 c");
  CHECK(annotate("aten::flatten", {{2, 3, 4}}, {{2, 12}}) == "a b c -> a (b c)");
  CHECK(annotate("aten::view", {{}}, {{1}}) == "? -> 1");
}

TEST_CASE("shape ops", "[ops][rules]") {
  CHECK(annotate("aten::transpose", {{8, 256, 6, 64}}, {{8, 6, 256, 64}},
                 {i64("dim0", 1), i64("dim1", 2)}) == "a b c d -> a c b d");
  CHECK(annotate("aten::permute", {{2, 3, 4}}, {{4, 2, 3}}, {dims("dims", {2, 0, 1})}) ==
        "a b c -> c a b");
  CHECK(annotate("aten::t", {{2, 3}}, {{3, 2}}) == "a b -> b a");
  CHECK(annotate("aten::unsqueeze", {{2, 3}}, {{2, 1, 3}}, {i64("dim", -2)}) == "a b -> a 1 b");
  CHECK(annotate("aten::squeeze", {{2, 1, 3}}, {{2, 3}}) == "a^ 1 c^ -> a^ c^");
  CHECK(annotate("aten::squeeze", {{2, 1, 3}}, {{2, 3}}, {i64("dim", 1)}) == "a 1 c -> a c");
  CHECK(annotate("aten::expand", {{2, 32, 2, 1, 16}}, {{2, 32, 2, 2, 16}},
                 {dims("size", {2, 32, 2, 2, 16})}) == "a b c 1 e -> a b c 2 e");
  CHECK(annotate("aten::expand", {{5}}, {{3, 5}}, {dims("size", {3, -1})}) == "a -> 3 a");
  CHECK(annotate("aten::expand_as", {{1, 5}, {3, 5}}, {{3, 5}}) == "1 b, 3 b -> 3 b");
  CHECK(annotate("aten::repeat", {{2, 3}}, {{4, 2, 6}}, {dims("repeats", {4, 1, 2})}) ==
        "a 3 -> 4 a 6");
  CHECK(annotate("aten::split", {{8, 256, 1152}}, {{8, 256, 384}, {8, 256, 384}, {8, 256, 384}},
                 {i64("split_size", 384), i64("dim", 2)}) ==
        "a b (3 d) -> a b d, a b d, a b d"); // equal pieces: d splits every piece alike
  CHECK(annotate("aten::split", {{4, 10}}, {{4, 4}, {4, 4}, {4, 2}},
                 {i64("split_size", 4), i64("dim", 1)}) == "a 10 -> a 4, a 4, a 2");
  CHECK(annotate("aten::chunk", {{4, 6}}, {{4, 3}, {4, 3}}, {i64("chunks", 2), i64("dim", -1)}) ==
        "a (2 c) -> a c, a c");
  // tensor_split's indices are whole-dim positions that no local rewrite adjusts.
  CHECK(annotate("aten::tensor_split", {{4, 6}}, {{4, 2}, {4, 2}, {4, 2}},
                 {dims("indices", {2, 4}), i64("dim", 1)}) == "a 6 -> a 2, a 2, a 2");

  CHECK(annotate("aten::unbind", {{3, 4}}, {{4}, {4}, {4}}, {i64("dim", 0)}) == "3 b -> b, b, b");
  CHECK(annotate("aten::cat", {{2, 4, 8, 8}, {2, 4, 8, 8}}, {{2, 4, 8, 16}}, {i64("dim", -1)}) ==
        "a b c 8, a b c 8 -> a b c 16");
  CHECK(annotate("aten::stack", {{2, 3}, {2, 3}}, {{2, 2, 3}}, {i64("dim", 1)}) ==
        "a b, a b -> a 2 b");
}

TEST_CASE("indexing ops freeze the indexed dim", "[ops][rules]") {
  CHECK(annotate("aten::slice", {{1, 1, 256, 256}}, {{1, 1, 32, 256}},
                 {i64("dim", 2), i64("start", 0), i64("end", 32), i64("step", 1)}) ==
        "a b 256 d -> a b 32 d");
  CHECK(annotate("aten::slice", {{4, 8}}, {{4, 8}}, {i64("dim", 0)}) == "a b -> a b");
  CHECK(annotate("aten::select", {{4, 8}}, {{8}}, {i64("dim", 0), i64("index", 1)}) == "4 b -> b");
  CHECK(annotate("aten::index_select", {{10, 8}, {3}}, {{3, 8}}, {i64("dim", 0)}) ==
        "a^ b, c -> c b");
  CHECK(annotate("aten::gather", {{4, 10}, {4, 2}}, {{4, 2}}, {i64("dim", 1)}) ==
        "a b^, a c^ -> a c^");
  CHECK(annotate("aten::tril", {{256, 256}}, {{256, 256}}) == "a^ b^ -> a^ b^");
  CHECK(annotate("aten::embedding", {{65, 384}, {8, 256}}, {{8, 256, 384}}) == "n^ e, * -> * e");
  CHECK(annotate("aten::one_hot", {{8}}, {{8, 10}}, {i64("num_classes", 10)}) == "a -> a 10");
}

TEST_CASE("padding freezes the padded dims", "[ops][rules]") {
  // F.pad(x, (1, 2)) pads the last dim; (0, 0, 3, 0) the second to last only.
  CHECK(annotate("aten::constant_pad_nd", {{2, 3, 8}}, {{2, 3, 11}},
                 {dims("pad", {1, 2}), arg("value", 0.0)}) == "a b 8 -> a b 11");
  CHECK(annotate("aten::constant_pad_nd", {{2, 3, 8}}, {{2, 6, 8}}, {dims("pad", {0, 0, 3, 0})}) ==
        "a 3 c -> a 6 c");
  CHECK(annotate("aten::reflection_pad2d", {{2, 3, 8, 8}}, {{2, 3, 10, 10}},
                 {dims("padding", {1, 1, 1, 1})}) == "a b 8 8 -> a b 10 10");
  CHECK(annotate("aten::pad", {{4, 5}}, {{4, 5}}, {dims("pad", {0, 0})}) == "a b -> a b");
  // A pad list longer than the rank is no padding the rule can state.
  CHECK(annotate("aten::constant_pad_nd", {{8}}, {{10}}, {dims("pad", {1, 1, 0, 0})}) == "");
}

TEST_CASE("interpolation freezes the spatial dims", "[ops][rules]") {
  CHECK(annotate("aten::upsample_bilinear2d", {{2, 3, 4, 10}}, {{2, 3, 8, 5}},
                 {dims("output_size", {8, 5}), arg("align_corners", false)}) ==
        "a b 4 10 -> a b 8 5");
  CHECK(annotate("aten::upsample_nearest1d", {{2, 3, 10}}, {{2, 3, 20}}) == "a b 10 -> a b 20");
}

TEST_CASE("scatters and index_add keep the written dim whole", "[ops][rules]") {
  CHECK(annotate("aten::scatter", {{4, 10}, {4, 3}, {4, 3}}, {{4, 10}}, {i64("dim", 1)}) ==
        "a b^, a c^, a c^ -> a b^");
  CHECK(annotate("aten::scatter", {{4, 10}, {4, 10}}, {{4, 10}}, {i64("dim", 0)}) ==
        "a^ b, c^ b -> a^ b");
  // An index covering part of a non-scatter dim freezes that dim too.
  CHECK(annotate("aten::scatter_add", {{4, 10}, {2, 10}, {2, 10}}, {{4, 10}}, {i64("dim", 1)}) ==
        "a^ b^, c^ d^, c^ d^ -> a^ b^");
  CHECK(annotate("aten::index_add", {{10, 8}, {3}, {3, 8}}, {{10, 8}}, {i64("dim", 0)}) ==
        "a^ b, c^, c^ b -> a^ b");
  CHECK(annotate("aten::index_fill", {{4, 10}, {2}}, {{4, 10}}, {i64("dim", 1)}) ==
        "a b^, c^ -> a b^");
}

TEST_CASE("creators have fixed outputs", "[ops][rules]") {
  CHECK(annotate("aten::arange", {}, {{256}}, {i64("end", 256)}) == "-> 256");
  CHECK(annotate("aten::ones", {}, {{256, 256}}, {dims("size", {256, 256})}) == "-> 256 256");
  CHECK(annotate("aten::full", {{}}, {{2, 3}}) == "? -> 2 3");
  CHECK(annotate("aten::zeros", {}, {{}}) == "-> ?");
}

TEST_CASE("norms, losses, convolutions, attention", "[ops][rules]") {
  Args ln{dims("normalized_shape", {384})};
  CHECK(annotate("aten::layer_norm", {{8, 256, 384}, {384}, {384}}, {{8, 256, 384}}, ln) ==
        "a b c^, c^, c^ -> a b c^");
  CHECK(annotate("aten::layer_norm", {{8, 384}}, {{8, 384}}, ln) == "a b^ -> a b^");
  CHECK(annotate("aten::native_layer_norm", {{8, 384}, {384}}, {{8, 384}, {8, 1}, {8, 1}}, ln) ==
        "a b^, b^ -> a b^, a 1, a 1");
  CHECK(annotate("aten::batch_norm", {{8, 16, 4, 4}, {16}, {16}, {16}, {16}}, {{8, 16, 4, 4}},
                 {arg("training", true)}) == "a^ b c^ d^, b, b, b, b -> a^ b c^ d^");
  CHECK(annotate("aten::cross_entropy_loss", {{2048, 65}, {2048}}, {{}}, {i64("reduction", 1)}) ==
        "a^ b^, a^ -> ?");
  CHECK(annotate("aten::cross_entropy_loss", {{2048, 65}, {2048}}, {{}}, {i64("reduction", 2)}) ==
        "a+ b^, a+ -> ?");
  CHECK(annotate("aten::cross_entropy_loss", {{8, 65, 4}, {8, 4}}, {{8, 4}},
                 {i64("reduction", 0)}) == "a b^ c, a c -> a c");
  CHECK(annotate("aten::mse_loss", {{4, 3}, {4, 3}}, {{}}, {i64("reduction", 1)}) ==
        "a^ b^, a^ b^ -> ?");
  CHECK(annotate("aten::conv2d", {{8, 3, 32, 32}, {16, 3, 3, 3}}, {{8, 16, 30, 30}}) ==
        "n c+ 32 32, o c+ 3 3 -> n o 30 30");
  CHECK(annotate("aten::conv2d", {{8, 3, 32, 32}, {16, 3, 3, 3}, {16}}, {{8, 16, 30, 30}}) ==
        "n c+ 32 32, o c+ 3 3, +o -> n o 30 30");
  CHECK(annotate("aten::conv1d", {{8, 4, 10}, {8, 2, 3}}, {{8, 8, 8}}, {i64("groups", 2)}) ==
        "n 4 10, 8 2 3 -> n 8 8");
  CHECK(annotate("aten::max_pool2d", {{8, 16, 32, 32}}, {{8, 16, 16, 16}}) ==
        "a b 32 32 -> a b 16 16");
  CHECK(annotate("aten::scaled_dot_product_attention",
                 {{2, 4, 16, 8}, {2, 4, 16, 8}, {2, 4, 16, 8}}, {{2, 4, 16, 8}},
                 {arg("is_causal", true)}) == "a h l^ e^, a h s^ e^, a h s^ f^ -> a h l^ f^");
}

TEST_CASE("the graph's mean loss splits its batch, other means keep it frozen", "[ops][rules]") {
  Args mean{i64("reduction", 1)}, sum{i64("reduction", 2)};
  // Each part means its share of the batch; the partitioner weighs it by that share.
  CHECK(annotateLoss("aten::cross_entropy_loss", {{2048, 65}, {2048}}, mean) == "a b^, a -> ()");
  CHECK(annotateLoss("aten::cross_entropy_loss", {{8, 65, 4}, {8, 4}}, mean) ==
        "a b^ c, a c -> ()");
  CHECK(annotateLoss("aten::cross_entropy_loss", {{8, 65}, {8, 65}}, mean) == "a b^, a b^ -> ()");
  CHECK(annotateLoss("aten::mse_loss", {{4, 3}, {4, 3}}, mean) == "a b, a b -> ()");
  CHECK(annotateLoss("aten::binary_cross_entropy", {{4, 3}, {4, 3}, {3}}, mean) ==
        "a b, a b, b -> ()");
  // Class weights make the mean's divisor data-dependent: frozen.
  CHECK(annotateLoss("aten::nll_loss_nd", {{8, 65}, {8}, {65}}, mean) == "a^ b^, a^, b^ -> ?");
  // A sum splits by value, with or without weights.
  CHECK(annotateLoss("aten::cross_entropy_loss", {{8, 65}, {8}}, sum) == "a+ b^, a+ -> ()");
  CHECK(annotateLoss("aten::nll_loss_nd", {{8, 65}, {8}, {65}}, sum) == "a+ b^, a+, b^ -> ()");
  // No batch: nothing to split.
  CHECK(annotateLoss("aten::cross_entropy_loss", {{65}, {}}, mean) == "a^, ? -> ?");

  // A mean loss whose value is not the graph's loss (here it is scaled after).
  ir::Graph g;
  addNode(g, "aten::mse_loss", {{4, 3}, {4, 3}}, {{}}, mean);
  addNode(g, "aten::mul", {{}, {}}, {{}});
  g.nodes()[1].inputs[0] = g.nodes()[0].outputs[0];
  g.outputs = {g.nodes()[1].outputs[0]};
  g.lossOutput = 0;
  REQUIRE(ops::annotateGraph(g, registry()).isOk());
  CHECK(g.nodes()[0].annotations == std::vector<std::string>{"a^ b^, a^ b^ -> ?"});

  // The graph's loss, but also read by another node: its share-weighted parts
  // would be taken for plain partial sums there, so it stays whole.
  ir::Graph read;
  addNode(read, "aten::mse_loss", {{4, 3}, {4, 3}}, {{}}, mean);
  addNode(read, "aten::mul", {{}, {}}, {{}});
  read.nodes()[1].inputs[0] = read.nodes()[0].outputs[0];
  read.outputs = {read.nodes()[0].outputs[0], read.nodes()[1].outputs[0]};
  read.lossOutput = 0;
  REQUIRE(ops::annotateGraph(read, registry()).isOk());
  CHECK(read.nodes()[0].annotations == std::vector<std::string>{"a^ b^, a^ b^ -> ?"});
}

TEST_CASE("annotateGraph reports ops without annotations once", "[ops][registry]") {
  ir::Graph g;
  addNode(g, "myops::weird", {{2}}, {{2}}, {}, 10);
  addNode(g, "aten::relu", {{2}}, {{2}}, {}, 11);
  addNode(g, "myops::weird", {{2}}, {{2}}, {}, 12);
  addNode(g, "aten::einsum", {{3, 3}}, {{3}}, {arg("equation", std::string("ii->i"))}, 13);
  auto missing = ops::annotateGraph(g, registry());
  REQUIRE(missing.isOk());
  REQUIRE(missing->size() == 2);
  CHECK((*missing)[0].op == "myops::weird");
  CHECK((*missing)[0].count == 2);
  CHECK((*missing)[0].loc == "model.py:10");
  CHECK((*missing)[1].op == "aten::einsum");
  CHECK(g.nodes()[1].annotations == std::vector<std::string>{"a -> a"});
  CHECK(g.nodes()[0].annotations.empty());
}

TEST_CASE("annotateGraph checks annotations against shapes", "[ops][registry]") {
  ops::OpRegistry r = registry();
  r.add("test::bad",
        [](const ir::Graph &, const ir::Node &) { return std::vector<std::string>{"a b -> a b"}; });
  ir::Graph g;
  addNode(g, "test::bad", {{3}}, {{3}}, {}, 7);
  auto result = ops::annotateGraph(g, r);
  REQUIRE(!result.isOk());
  CHECK(result.status().kind() == ErrorKind::Internal);
  CHECK_THAT(result.status().message(), Catch::Matchers::ContainsSubstring("model.py:7") &&
                                            Catch::Matchers::ContainsSubstring("test::bad") &&
                                            Catch::Matchers::ContainsSubstring("'a b -> a b'"));

  // User annotations are candidates: the first that fits is kept.
  r.addFixed("test::user", {"a b -> a b", "a -> a"});
  ir::Graph h;
  addNode(h, "test::user", {{3}}, {{3}});
  REQUIRE(ops::annotateGraph(h, r).isOk());
  CHECK(h.nodes()[0].annotations == std::vector<std::string>{"a -> a"});
  r.addFixed("test::user", {"a b -> a b"});
  auto none = ops::annotateGraph(h, r);
  REQUIRE(!none.isOk());
  CHECK(none.status().kind() == ErrorKind::BadInput);
}

namespace {
std::string writeTemp(const std::string &name, const std::string &text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}
} // namespace

TEST_CASE("user annotations load from YAML", "[ops][registry][yaml]") {
  std::string path =
      writeTemp("nnsc_ops_good.yaml", "libraries: [libmyops.so]\n"
                                      "ops:\n"
                                      "  myops::fused_loss: [\"b l d^, n^ d^, b l -> b l\"]\n"
                                      "  myops::scale: 'a b -> a b | a -> a'\n");
  ops::OpRegistry r;
  Status st = r.loadUserYaml(path);
  INFO(st.message());
  REQUIRE(st.isOk());
  REQUIRE(r.userLibraries().size() == 1);
  CHECK(r.userLibraries()[0] == (std::filesystem::temp_directory_path() / "libmyops.so").string());
  ir::Graph g;
  addNode(g, "myops::fused_loss", {{2, 8, 16}, {65, 16}, {2, 8}}, {{2, 8}});
  addNode(g, "myops::scale", {{4}}, {{4}});
  REQUIRE(ops::annotateGraph(g, r).isOk());
  CHECK(g.nodes()[0].annotations == std::vector<std::string>{"b l d^, n^ d^, b l -> b l"});
  CHECK(g.nodes()[1].annotations == std::vector<std::string>{"a -> a"});
}

TEST_CASE("user YAML errors are located", "[ops][registry][yaml]") {
  ops::OpRegistry r;
  std::string unknown =
      writeTemp("nnsc_ops_unknown.yaml", "ops:\n  myops::f: [\"a -> a\"]\nopz: 1\n");
  Status st = r.loadUserYaml(unknown);
  REQUIRE(!st.isOk());
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring(
                               "nnsc_ops_unknown.yaml:3:1: error: unknown key 'opz'"));

  // "a -> b": 'b' (column 6 of the annotation) is bound by no input; the
  // annotation starts at column 15 of the line, after the quote.
  std::string bad = writeTemp("nnsc_ops_bad.yaml", "ops:\n  myops::f: [\"a -> b\"]\n");
  st = r.loadUserYaml(bad);
  REQUIRE(!st.isOk());
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("nnsc_ops_bad.yaml:2:20: error:"));
  CHECK(!r.has("myops::f"));

  std::string unqualified = writeTemp("nnsc_ops_name.yaml", "ops:\n  fused: [\"a -> a\"]\n");
  st = r.loadUserYaml(unqualified);
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring(":2:3: error: op name 'fused'"));
}
