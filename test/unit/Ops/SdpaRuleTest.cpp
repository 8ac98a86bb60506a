// aten::scaled_dot_product_attention: the rule's annotation for plain,
// grouped-query and masked attention, bound to the node's shapes, and what
// cutting the batch or the heads does to every operand.
#include "../CatchCompat.h"

#include "nnsc/Ops/AnnotationSplit.h"
#include "nnsc/Ops/OpRegistry.h"

using namespace nnsc;
using ir::Argument;
using ir::Shape;

namespace {

using Args = std::vector<Argument>;
using Dims = std::vector<int>;
using Names = std::vector<std::string>;

const char *kSdpa = "aten::scaled_dot_product_attention";

/// A one-node graph: SDPA over `ins` (q, k, v and maybe a mask) with the
/// traced argument list (tensors, then dropout_p, is_causal, scale, enable_gqa).
ir::Graph sdpaGraph(const std::vector<Shape> &ins, const Shape &out, bool causal, bool gqa) {
  ir::Graph g;
  ir::Node n;
  n.op = kSdpa;
  n.loc = {"model.py", 1, 1};
  const char *names[] = {"query", "key", "value", "attn_mask"};
  for (size_t i = 0; i < ins.size(); ++i) {
    ir::Tensor t;
    t.shape = ins[i];
    n.inputs.push_back(g.addTensor(t));
    n.args.push_back(Argument{names[i], ir::TensorRef{static_cast<int32_t>(i)}});
  }
  if (ins.size() == 3)
    n.args.push_back(Argument{"attn_mask", ir::NoneValue{}});
  n.args.push_back(Argument{"dropout_p", 0.0});
  n.args.push_back(Argument{"is_causal", causal});
  n.args.push_back(Argument{"scale", ir::NoneValue{}});
  n.args.push_back(Argument{"enable_gqa", gqa});
  ir::Tensor o;
  o.shape = out;
  n.outputs.push_back(g.addTensor(o));
  g.addNode(std::move(n));
  return g;
}

struct Annotated {
  std::string text; ///< "" when the node is left replicate-only
  std::optional<ops::BoundAnno> bound;
};

/// The annotation annotateGraph gives the node, bound to its shapes.
Annotated annotateSdpa(const std::vector<Shape> &ins, const Shape &out, bool causal = true,
                       bool gqa = false) {
  static const ops::OpRegistry registry = ops::OpRegistry::builtin();
  ir::Graph g = sdpaGraph(ins, out, causal, gqa);
  auto missing = ops::annotateGraph(g, registry);
  INFO(missing.status().message());
  REQUIRE(missing.isOk());
  const ir::Node &n = g.nodes()[0];
  if (n.annotations.empty())
    return {};
  REQUIRE(n.annotations.size() == 1);
  auto anno = ops::parseAnnotation(n.annotations[0]);
  REQUIRE(anno);
  auto bound = ops::bindShapes(*anno, ins, {out});
  INFO(n.annotations[0] << ": " << bound.status().message());
  REQUIRE(bound);
  return {n.annotations[0], bound.take()};
}

ops::SplitEffect cut(const Annotated &a, const std::string &id, int n) {
  REQUIRE(a.bound);
  auto e = ops::splitEffect(*a.bound, id, n);
  INFO(id << ": " << e.status().message());
  REQUIRE(e);
  return e.take();
}

std::string cutError(const Annotated &a, const std::string &id, int n) {
  REQUIRE(a.bound);
  auto e = ops::splitEffect(*a.bound, id, n);
  REQUIRE_FALSE(e);
  return e.status().message();
}

} // namespace

TEST_CASE("sdpa splits over batch and heads, sequence and head dims are frozen",
          "[ops][rules][sdpa]") {
  Annotated a = annotateSdpa({{2, 4, 16, 8}, {2, 4, 16, 8}, {2, 4, 16, 8}}, {2, 4, 16, 8});
  CHECK(a.text == "a h l^ e^, a h s^ e^, a h s^ f^ -> a h l^ f^");
  CHECK(ops::splittableIdents(*a.bound) == Names{"a", "h"});

  ops::SplitEffect batch = cut(a, "a", 2);
  CHECK((batch.inputDims == Dims{0, 0, 0} && batch.outputDims == Dims{0}));
  CHECK_FALSE(batch.valueSplit);
  ops::SplitEffect heads = cut(a, "h", 4);
  CHECK((heads.inputDims == Dims{1, 1, 1} && heads.outputDims == Dims{1}));
  CHECK(cutError(a, "h", 3) == "dimension 'h' has size 4, which is not divisible into 3 parts");
  for (const char *frozen : {"l", "s", "e", "f"})
    CHECK(cutError(a, frozen, 2) ==
          "dimension '" + std::string(frozen) + "' is frozen (^) and cannot be split");

  // Non-causal attention and other key lengths and value widths: the same.
  CHECK(annotateSdpa({{2, 4, 16, 8}, {2, 4, 12, 8}, {2, 4, 12, 6}}, {2, 4, 16, 6}, false).text ==
        "a h l^ e^, a h s^ e^, a h s^ f^ -> a h l^ f^");
  // Without a heads dim, or with several batch dims before it.
  CHECK(annotateSdpa({{2, 16, 8}, {2, 16, 8}, {2, 16, 8}}, {2, 16, 8}).text ==
        "a l^ e^, a s^ e^, a s^ f^ -> a l^ f^");
  CHECK(
      annotateSdpa({{3, 2, 4, 16, 8}, {3, 2, 4, 16, 8}, {3, 2, 4, 16, 8}}, {3, 2, 4, 16, 8}).text ==
      "a b h l^ e^, a b h s^ e^, a b h s^ f^ -> a b h l^ f^");
}

TEST_CASE("sdpa with grouped query heads cuts q's and k/v's heads alike", "[ops][rules][sdpa]") {
  // 8 query heads over 2 key/value heads: query head i reads kv head i / 4.
  Annotated a =
      annotateSdpa({{2, 8, 16, 8}, {2, 2, 16, 8}, {2, 2, 16, 8}}, {2, 8, 16, 8}, true, true);
  CHECK(a.text == "a (h r) l^ e^, a h s^ e^, a h s^ f^ -> a (h r) l^ f^");
  CHECK(a.bound->sizes.at("h") == 2);
  CHECK(a.bound->sizes.at("r") == 4);
  CHECK(ops::splittableIdents(*a.bound) == Names{"a", "h"});

  // Cutting h in 2: part i holds kv head i and query heads 4i..4i+3, both
  // contiguous (one block), so each part is a whole grouped attention.
  ops::SplitEffect heads = cut(a, "h", 2);
  CHECK((heads.inputDims == Dims{1, 1, 1} && heads.outputDims == Dims{1}));
  CHECK((heads.inputBlocks == std::vector<int64_t>{1, 1, 1} &&
         heads.outputBlocks == std::vector<int64_t>{1}));
  CHECK(cutError(a, "h", 4) == "dimension 'h' has size 2, which is not divisible into 4 parts");
  ops::SplitEffect batch = cut(a, "a", 2);
  CHECK((batch.inputDims == Dims{0, 0, 0} && batch.outputDims == Dims{0}));

  // Equal head counts under enable_gqa are plain attention.
  CHECK(
      annotateSdpa({{2, 4, 16, 8}, {2, 4, 16, 8}, {2, 4, 16, 8}}, {2, 4, 16, 8}, true, true).text ==
      "a h l^ e^, a h s^ e^, a h s^ f^ -> a h l^ f^");
}

TEST_CASE("sdpa's mask follows the score dims it has", "[ops][rules][sdpa]") {
  Shape q{2, 4, 16, 8}, kv{2, 4, 12, 8};
  // [L, S]: whole on every part.
  Annotated square = annotateSdpa({q, kv, kv, {16, 12}}, q, false);
  CHECK(square.text == "a h l^ e^, a h s^ e^, a h s^ f^, l^ s^ -> a h l^ f^");
  CHECK(cut(square, "h", 2).inputDims == Dims{1, 1, 1, -1});
  CHECK(cut(square, "a", 2).inputDims == Dims{0, 0, 0, -1});
  // [B, 1, L, S]: cut with the batch, whole across heads.
  Annotated perBatch = annotateSdpa({q, kv, kv, {2, 1, 16, 12}}, q, false);
  CHECK(perBatch.text == "a h l^ e^, a h s^ e^, a h s^ f^, a 1 l^ s^ -> a h l^ f^");
  CHECK(cut(perBatch, "a", 2).inputDims == Dims{0, 0, 0, 0});
  CHECK(cut(perBatch, "h", 2).inputDims == Dims{1, 1, 1, -1});
  // [B, H, L, S]: cut with either.
  Annotated full = annotateSdpa({q, kv, kv, {2, 4, 16, 12}}, q, false);
  CHECK(cut(full, "h", 4).inputDims == Dims{1, 1, 1, 1});
  // A query-head mask under grouped queries takes the merged dim.
  Annotated grouped = annotateSdpa({{2, 8, 16, 8}, {2, 2, 16, 8}, {2, 2, 16, 8}, {1, 8, 16, 16}},
                                   {2, 8, 16, 8}, false, true);
  CHECK(grouped.text == "a (h r) l^ e^, a h s^ e^, a h s^ f^, 1 (h r) l^ s^ -> a (h r) l^ f^");
  ops::SplitEffect heads = cut(grouped, "h", 2);
  CHECK((heads.inputDims == Dims{1, 1, 1, 1} && heads.outputDims == Dims{1}));
  CHECK(cut(grouped, "a", 2).inputDims == Dims{0, 0, 0, -1});
}

TEST_CASE("sdpa shapes the rule does not know stay replicate-only", "[ops][rules][sdpa]") {
  // Different head counts without enable_gqa, heads that do not group evenly,
  // a mask that does not broadcast to the scores.
  CHECK(annotateSdpa({{2, 8, 16, 8}, {2, 2, 16, 8}, {2, 2, 16, 8}}, {2, 8, 16, 8}).text == "");
  CHECK(
      annotateSdpa({{2, 6, 16, 8}, {2, 4, 16, 8}, {2, 4, 16, 8}}, {2, 6, 16, 8}, true, true).text ==
      "");
  CHECK(annotateSdpa({{2, 4, 16, 8}, {2, 4, 16, 8}, {2, 4, 16, 8}, {3, 16, 16}}, {2, 4, 16, 8})
            .text == "");
}
