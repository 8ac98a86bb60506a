// Rules for ops common in vision and MoE models (advanced indexing, scatters
// into views, windows, group / instance norm, transposed convolutions, random
// draws): the annotation of a small node, checked against its shapes by
// annotateGraph, and what splitting one dim of it does to every tensor.
#include "../CatchCompat.h"

#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Ops/LocalArgs.h"
#include "nnsc/Ops/OpRegistry.h"

using namespace nnsc;
using ir::Argument;
using ir::Shape;

namespace {

using Args = std::vector<Argument>;
using DimList = std::vector<int>;

/// One tensor of a test node: its shape and dtype.
struct T {
  Shape shape;
  ir::DType dtype = ir::DType::Float32;
  T(Shape s, ir::DType d = ir::DType::Float32) : shape(std::move(s)), dtype(d) {}
};

struct OneNode {
  ir::Graph graph;
  std::string anno; ///< "" when replicate-only

  OneNode(const std::string &op, const std::vector<T> &ins, const std::vector<T> &outs,
          Args args = {}) {
    ir::Node n;
    n.op = op;
    n.loc = {"model.py", 1, 1};
    for (const T &t : ins)
      n.inputs.push_back(graph.addTensor({-1, "i", t.shape, t.dtype}));
    for (const T &t : outs)
      n.outputs.push_back(graph.addTensor({-1, "o", t.shape, t.dtype}));
    n.args = std::move(args);
    graph.addNode(std::move(n));
    static const ops::OpRegistry registry = ops::OpRegistry::builtin();
    auto missing = ops::annotateGraph(graph, registry);
    INFO(op << ": " << (missing ? "" : missing.status().message()));
    REQUIRE(missing.isOk());
    const auto &annos = graph.nodes()[0].annotations;
    REQUIRE(annos.size() <= 1);
    anno = annos.empty() ? "" : annos[0];
  }

  /// The effect of splitting dim `dim` of input `input` into `parts`.
  ops::SplitEffect split(int input, int dim, int parts = 2) const {
    std::vector<Shape> ins;
    for (int64_t id : graph.nodes()[0].inputs)
      ins.push_back(graph.tensor(id).shape);
    auto parsed = ops::parseAnnotation(anno);
    REQUIRE(parsed);
    auto bound = ops::bindShapes(*parsed, ins, {});
    REQUIRE(bound);
    auto id = ops::identAt(*bound, input, dim);
    REQUIRE(id);
    auto effect = ops::splitEffect(*bound, *id, parts);
    INFO(anno << " split " << *id << ": " << effect.status().message());
    REQUIRE(effect);
    return *effect;
  }
};

Argument arg(std::string name, ir::ArgValue v) { return Argument{std::move(name), std::move(v)}; }
Argument i64(std::string name, int64_t v) { return arg(std::move(name), v); }
Argument refs(std::vector<int32_t> indices) {
  return arg("indices", ir::TensorListRef{std::move(indices)});
}
constexpr int32_t kNone = -1; // a None entry of a TensorListRef
const ir::DType kLong = ir::DType::Int64, kBool = ir::DType::Bool;

} // namespace

TEST_CASE("index: a bias table looked up by a flattened index", "[ops][rules][index]") {
  // table[idx.view(-1)]: rows frozen, heads and the index split.
  OneNode bias("aten::index", {{{9, 2}}, {{16}, kLong}}, {{{16, 2}}}, {refs({1})});
  CHECK(bias.anno == "a^ b, c -> c b");
  CHECK(bias.split(1, 0).inputDims == DimList{-1, 0});
  CHECK(bias.split(1, 0).outputDims == DimList{0});
  CHECK(bias.split(0, 1).inputDims == DimList{1, -1});
  CHECK(bias.split(0, 1).outputDims == DimList{1});
}

TEST_CASE("index: None entries and several index tensors", "[ops][rules][index]") {
  // x[:, ids]: the result keeps dim 0, the index replaces dim 1.
  OneNode cols("aten::index", {{{4, 8}}, {{3}, kLong}}, {{{4, 3}}}, {refs({kNone, 1})});
  CHECK(cols.anno == "a b^, c -> a c");
  CHECK(cols.split(0, 0).outputDims == DimList{0});
  // img[:, :, ids] on [2, 4, 6, 5].
  OneNode rows("aten::index", {{{2, 4, 6, 5}}, {{3}, kLong}}, {{{2, 4, 3, 5}}},
               {refs({kNone, kNone, 1})});
  CHECK(rows.anno == "a b c^ d, e -> a b e d");
  // x[i, j] with i [3, 1] and j [6] broadcast to [3, 6], adjacent: in place.
  OneNode pair("aten::index", {{{4, 8, 2}}, {{3, 1}, kLong}, {{6}, kLong}}, {{{3, 6, 2}}},
               {refs({1, 2})});
  CHECK(pair.anno == "a^ b^ c, d 1, e -> d e c");
  CHECK(pair.split(2, 0).inputDims == DimList{-1, -1, 0});
  CHECK(pair.split(2, 0).outputDims == DimList{1});
  // x[i, :, j]: not adjacent, so B goes in front.
  OneNode apart("aten::index", {{{4, 6, 8}}, {{3}, kLong}, {{3}, kLong}}, {{{3, 6}}},
                {refs({1, kNone, 2})});
  CHECK(apart.anno == "a^ b c^, d, d -> d b");
  // A bool mask has a data-dependent result: replicate-only.
  OneNode mask("aten::index", {{{4, 8}}, {{4, 8}, kBool}}, {{{7}}}, {refs({1})});
  CHECK(mask.anno == "");
  // An output that does not follow numpy's rule is no annotation.
  OneNode wrong("aten::index", {{{4, 8}}, {{3}, kLong}}, {{{3, 8}}}, {refs({kNone, 1})});
  CHECK(wrong.anno == "");
}

TEST_CASE("index_put: self's other dims split with the values", "[ops][rules][index]") {
  Args put{refs({1}), arg("values", ir::TensorRef{2}), arg("accumulate", true)};
  OneNode rows("aten::index_put", {{{10, 8}}, {{3}, kLong}, {{3, 8}}}, {{{10, 8}}}, put);
  CHECK(rows.anno == "a^ b, c^, c^ b -> a^ b");
  CHECK(rows.split(0, 1).inputDims == DimList{1, -1, 1});
  CHECK(rows.split(0, 1).outputDims == DimList{1});
  // A 0-dim value is replicated.
  OneNode scalar("aten::index_put", {{{10, 8}}, {{3}, kLong}, {{}}}, {{{10, 8}}}, put);
  CHECK(scalar.anno == "a^ b, c^, ? -> a^ b");
  // x[mask] = 0 with a mask over all of x is elementwise.
  OneNode mask("aten::index_put", {{{4, 8}}, {{4, 8}, kBool}, {{}}}, {{{4, 8}}}, put);
  CHECK(mask.anno == "a b, a b, ? -> a b");
  CHECK(mask.split(0, 1).inputDims == DimList{1, 1, -1});
  // A mask with as many values as it selects cannot split.
  OneNode many("aten::index_put", {{{4, 8}}, {{4, 8}, kBool}, {{5}}}, {{{4, 8}}}, put);
  CHECK(many.anno == "");
}

TEST_CASE("take_along_dim, slice_scatter, select_scatter", "[ops][rules][index]") {
  OneNode take("aten::take_along_dim", {{{4, 8}}, {{4, 3}, kLong}}, {{{4, 3}}}, {i64("dim", 1)});
  CHECK(take.anno == "a b^, a c^ -> a c^");
  CHECK(take.split(0, 0).outputDims == DimList{0});
  OneNode bcast("aten::take_along_dim", {{{1, 8}}, {{4, 3}, kLong}}, {{{4, 3}}}, {i64("dim", 1)});
  CHECK(bcast.anno == "1 b^, c^ d^ -> c^ d^");
  OneNode flat("aten::take_along_dim", {{{4, 8}}, {{5}, kLong}}, {{{5}}}, {});
  CHECK(flat.anno == "");

  // mask[h0:h1, ...] = k becomes slice_scatter(base, src, dim, start, end, step).
  Args range{i64("dim", 1), i64("start", 1), i64("end", 3), i64("step", 1)};
  OneNode slice("aten::slice_scatter", {{{4, 8}}, {{4, 2}}}, {{{4, 8}}}, range);
  CHECK(slice.anno == "a b^, a 2 -> a b^");
  CHECK(slice.split(0, 0).inputDims == DimList{0, 0});
  OneNode whole("aten::slice_scatter", {{{4, 8}}, {{4, 8}}}, {{{4, 8}}}, range);
  CHECK(whole.anno == "a b, a b -> a b");

  OneNode select("aten::select_scatter", {{{4, 8, 2}}, {{4, 2}}}, {{{4, 8, 2}}},
                 {i64("dim", 1), i64("index", 0)});
  CHECK(select.anno == "a b^ c, a c -> a b^ c");
  CHECK(select.split(0, 2).inputDims == DimList{2, 1});
}

TEST_CASE("repeat_interleave, unfold and im2col", "[ops][rules][window]") {
  Args twice{i64("repeats", 2), i64("dim", 1)};
  OneNode rep("aten::repeat_interleave", {{{4, 8}}}, {{{4, 16}}}, twice);
  CHECK(rep.anno == "a b -> a (b 2)");
  CHECK(rep.split(0, 1).outputDims == DimList{1});
  // A meta trace that could not size the result (LibTorch 1.13: [4, 0]).
  CHECK(OneNode("aten::repeat_interleave", {{{4, 8}}}, {{{4, 0}}}, twice).anno == "");
  OneNode flat("aten::repeat_interleave", {{{4, 8}}}, {{{64}}},
               {i64("repeats", 2), arg("dim", ir::NoneValue{})});
  CHECK(flat.anno == "a^ b^ -> 64");

  OneNode unfold("aten::unfold", {{{4, 8}}}, {{{4, 4, 2}}},
                 {i64("dimension", 1), i64("size", 2), i64("step", 2)});
  CHECK(unfold.anno == "a 8 -> a 4 2");
  // F.unfold: [N, C, H, W] -> [N, C * kh * kw, L], channel-major.
  OneNode im2col("aten::im2col", {{{2, 4, 4, 4}}}, {{{2, 16, 4}}},
                 {arg("kernel_size", std::vector<int64_t>{2, 2})});
  CHECK(im2col.anno == "a b 4 4 -> a (b 4) 4");
  CHECK(im2col.split(0, 1).outputDims == DimList{1});
}

TEST_CASE("group_norm splits the batch and whole groups", "[ops][rules][norm]") {
  Args two{i64("num_groups", 2)};
  OneNode gn("aten::group_norm", {{{2, 8, 4, 4}}, {{8}}, {{8}}}, {{{2, 8, 4, 4}}}, two);
  CHECK(gn.anno == "a (b 4) c^ d^, (b 4), (b 4) -> a (b 4) c^ d^");
  CHECK(gn.split(0, 1).inputDims == DimList{1, 0, 0});
  CHECK(gn.split(0, 0).inputDims == DimList{0, -1, -1});
  OneNode one("aten::group_norm", {{{2, 8, 4}}}, {{{2, 8, 4}}}, {i64("num_groups", 1)});
  CHECK(one.anno == "a b^ c^ -> a b^ c^");
  OneNode each("aten::group_norm", {{{2, 8, 4}}}, {{{2, 8, 4}}}, {i64("num_groups", 8)});
  CHECK(each.anno == "a b c^ -> a b c^");
  OneNode native("aten::native_group_norm", {{{2, 8, 9}}, {{8}}, {{8}}},
                 {{{2, 8, 9}}, {{2, 2}}, {{2, 2}}},
                 {i64("N", 2), i64("C", 8), i64("HxW", 9), i64("group", 2)});
  CHECK(native.anno == "a (b 4) c^, (b 4), (b 4) -> a (b 4) c^, a b, a b");
  CHECK(native.split(0, 1).outputDims == DimList{1, 1, 1});
}

TEST_CASE("group_norm's group count follows the local channels", "[ops][localargs]") {
  OneNode gn("aten::group_norm", {{{2, 8, 4}}}, {{{2, 8, 4}}}, {i64("num_groups", 4)});
  const ir::Node &n = gn.graph.nodes()[0];
  auto half = ops::localizeArgs(gn.graph, n, ops::LocalShapes{{{2, 4, 4}}, {{2, 4, 4}}});
  REQUIRE(half);
  CHECK(std::get<int64_t>((*half)[0].value) == 2);
  auto broken = ops::localizeArgs(gn.graph, n, ops::LocalShapes{{{2, 3, 4}}, {{2, 3, 4}}});
  CHECK_FALSE(broken);

  Args native{i64("N", 2), i64("C", 8), i64("HxW", 9), i64("group", 2)};
  OneNode ng("aten::native_group_norm", {{{2, 8, 9}}}, {{{2, 8, 9}}, {{2, 2}}, {{2, 2}}}, native);
  auto local = ops::localizeArgs(ng.graph, ng.graph.nodes()[0],
                                 ops::LocalShapes{{{1, 4, 9}}, {{1, 4, 9}, {1, 1}, {1, 1}}});
  REQUIRE(local);
  CHECK(std::get<int64_t>((*local)[0].value) == 1); // N
  CHECK(std::get<int64_t>((*local)[1].value) == 4); // C
  CHECK(std::get<int64_t>((*local)[3].value) == 1); // group

  OneNode ss("aten::slice_scatter", {{{4, 8}}, {{4, 8}}}, {{{4, 8}}},
             {i64("dim", 1), i64("start", 0), i64("end", 8), i64("step", 1)});
  auto cut = ops::localizeArgs(ss.graph, ss.graph.nodes()[0],
                               ops::LocalShapes{{{4, 4}, {4, 4}}, {{4, 4}}});
  REQUIRE(cut);
  CHECK(std::get<int64_t>((*cut)[2].value) == 4); // end
}

TEST_CASE("instance_norm, transposed convolutions", "[ops][rules][norm]") {
  OneNode in("aten::instance_norm", {{{2, 4, 5, 5}}, {{4}}, {{4}}}, {{{2, 4, 5, 5}}},
             {arg("running_mean", ir::NoneValue{}), arg("use_input_stats", true)});
  CHECK(in.anno == "a b c^ d^, b, b -> a b c^ d^");
  OneNode tracked("aten::instance_norm", {{{2, 4, 5}}, {{4}}, {{4}}}, {{{2, 4, 5}}},
                  {arg("running_mean", ir::TensorRef{1}), arg("use_input_stats", true)});
  CHECK(tracked.anno == "a^ b c^, b, b -> a^ b c^");

  // ConvTranspose2d(4, 6, 2, stride=2): weight [C_in, C_out, kh, kw].
  OneNode up("aten::conv_transpose2d", {{{2, 4, 4, 4}}, {{4, 6, 2, 2}}, {{6}}}, {{{2, 6, 8, 8}}});
  CHECK(up.anno == "n c+ 4 4, c+ o 2 2, +o -> n o 8 8");
  CHECK(up.split(1, 1).inputDims == DimList{-1, 1, 0});
  ops::SplitEffect channels = up.split(0, 1); // the input channels: a value split
  CHECK((channels.valueSplit && channels.inputDims == DimList{1, 0, -1}));
  CHECK(channels.inputValue == std::vector<bool>{false, false, true}); // the bias, once
  OneNode traced("aten::_convolution", {{{2, 4, 4, 4}}, {{4, 3, 2, 2}}}, {{{2, 3, 8, 8}}},
                 {arg("transposed", true), i64("groups", 1)});
  CHECK(traced.anno == "n c+ 4 4, c+ o 2 2 -> n o 8 8");
  CHECK(traced.split(0, 1).valueSplit);
}

TEST_CASE("random draws and feature dropout", "[ops][rules][random]") {
  // Stochastic depth: x.new_empty([B, 1]).bernoulli_(keep).
  CHECK(OneNode("aten::bernoulli", {{{4, 1}}}, {{{4, 1}}}, {arg("p", 0.8)}).anno == "a b -> a b");
  CHECK(OneNode("aten::bernoulli_", {{{4, 8}}, {{8}}}, {{{4, 8}}}).anno == "a b, b -> a b");
  CHECK(OneNode("aten::normal_", {{{4, 8}}}, {{{4, 8}}}).anno == "a b -> a b");
  CHECK(OneNode("aten::copy", {{{4, 8}}, {{8}}}, {{{4, 8}}}).anno == "a b, b -> a b");
  // dropout2d drops whole channels: the spatial dims stay whole.
  OneNode drop2d("aten::feature_dropout", {{{2, 3, 4, 4}}}, {{{2, 3, 4, 4}}});
  CHECK(drop2d.anno == "a b c^ d^ -> a b c^ d^");
}
