#include "../CatchCompat.h"

#include "nnsc/Ops/LocalArgs.h"

using namespace nnsc;
using namespace nnsc::ir;

namespace {

// A graph with one node `op(args)` over tensors of the given full shapes.
struct OneNode {
  Graph graph;
  Node node;

  OneNode(std::string op, std::vector<Shape> ins, std::vector<Shape> outs,
          std::vector<Argument> args) {
    Node n;
    n.op = std::move(op);
    for (Shape &s : ins)
      n.inputs.push_back(graph.addTensor({-1, "i", std::move(s)}));
    for (Shape &s : outs)
      n.outputs.push_back(graph.addTensor({-1, "o", std::move(s)}));
    n.args = std::move(args);
    n.loc = {"model.py", 7, 0};
    graph.addNode(n);
    node = graph.nodes()[0];
  }

  std::vector<Argument> local(std::vector<Shape> ins, std::vector<Shape> outs) {
    auto args = ops::localizeArgs(graph, node, {std::move(ins), std::move(outs)});
    REQUIRE(args.isOk());
    return *args;
  }
  Status error(std::vector<Shape> ins, std::vector<Shape> outs) {
    auto args = ops::localizeArgs(graph, node, {std::move(ins), std::move(outs)});
    REQUIRE(!args.isOk());
    return args.status();
  }
};

const ArgValue &argNamed(const std::vector<Argument> &args, const std::string &name) {
  for (const Argument &a : args)
    if (a.name == name)
      return a.value;
  FAIL("no argument " << name);
  static ArgValue none;
  return none;
}
std::vector<int64_t> ints(const std::vector<Argument> &args, const std::string &name) {
  return std::get<std::vector<int64_t>>(argNamed(args, name));
}
int64_t intOf(const std::vector<Argument> &args, const std::string &name) {
  return std::get<int64_t>(argNamed(args, name));
}

} // namespace

TEST_CASE("localizeArgs leaves whole shapes and unknown ops alone", "[ops][localargs]") {
  OneNode v("aten::view", {{8, 6}}, {{8, 2, 3}},
            {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{8, 2, -1}}});
  CHECK(ints(v.local({{8, 6}}, {{8, 2, 3}}), "size") == std::vector<int64_t>{8, 2, -1});
  OneNode ln("aten::layer_norm", {{4, 6}, {6}, {6}}, {{4, 6}},
             {{"input", TensorRef{0}},
              {"normalized_shape", std::vector<int64_t>{6}},
              {"weight", TensorRef{1}},
              {"bias", TensorRef{2}},
              {"eps", 1e-5}});
  CHECK(ints(ln.local({{2, 6}, {6}, {6}}, {{2, 6}}), "normalized_shape") ==
        std::vector<int64_t>{6});
  OneNode sm("aten::softmax", {{4, 6}}, {{4, 6}}, {{"self", TensorRef{0}}, {"dim", int64_t{-1}}});
  CHECK(intOf(sm.local({{4, 3}}, {{4, 3}}), "dim") == -1);
}

TEST_CASE("localizeArgs: view, reshape and expand sizes follow the local output",
          "[ops][localargs]") {
  OneNode v("aten::view", {{8, 6}}, {{8, 2, 3}},
            {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{8, 2, -1}}});
  CHECK(ints(v.local({{8, 3}}, {{8, 1, 3}}), "size") == std::vector<int64_t>{8, 1, 3});
  OneNode r("aten::reshape", {{2, 4, 6}}, {{8, 6}},
            {{"self", TensorRef{0}}, {"shape", std::vector<int64_t>{-1, 6}}});
  CHECK(ints(r.local({{1, 4, 6}}, {{4, 6}}), "shape") == std::vector<int64_t>{4, 6});
  OneNode u("aten::_unsafe_view", {{4, 6}}, {{24}},
            {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{24}}});
  CHECK(ints(u.local({{2, 6}}, {{12}}), "size") == std::vector<int64_t>{12});
  OneNode e(
      "aten::expand", {{4, 1}}, {{3, 4, 5}},
      {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{3, -1, 5}}, {"implicit", false}});
  auto ea = e.local({{2, 1}}, {{3, 2, 5}});
  CHECK(ints(ea, "size") == std::vector<int64_t>{3, 2, 5});
  CHECK(std::get<bool>(argNamed(ea, "implicit")) == false);
  OneNode b("aten::broadcast_to", {{4}}, {{2, 4}},
            {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{2, 4}}});
  CHECK(ints(b.local({{2}}, {{2, 2}}), "size") == std::vector<int64_t>{2, 2});
}

TEST_CASE("localizeArgs: split sizes change only when the split dim is partitioned",
          "[ops][localargs]") {
  OneNode s("aten::split", {{2, 8, 12}}, {{2, 8, 4}, {2, 8, 4}, {2, 8, 4}},
            {{"self", TensorRef{0}}, {"split_size", int64_t{4}}, {"dim", int64_t{2}}});
  // Another dim partitioned: unchanged.
  CHECK(intOf(s.local({{1, 8, 12}}, {{1, 8, 4}, {1, 8, 4}, {1, 8, 4}}), "split_size") == 4);
  // The split dim partitioned (each piece halved locally).
  CHECK(intOf(s.local({{2, 8, 6}}, {{2, 8, 2}, {2, 8, 2}, {2, 8, 2}}), "split_size") == 2);
  OneNode w(
      "aten::split_with_sizes", {{6, 4}}, {{2, 4}, {4, 4}},
      {{"self", TensorRef{0}}, {"split_sizes", std::vector<int64_t>{2, 4}}, {"dim", int64_t{-2}}});
  CHECK(ints(w.local({{6, 2}}, {{2, 2}, {4, 2}}), "split_sizes") == std::vector<int64_t>{2, 4});
  CHECK(ints(w.local({{3, 4}}, {{1, 4}, {2, 4}}), "split_sizes") == std::vector<int64_t>{1, 2});
}

TEST_CASE("localizeArgs: slice and narrow of a partitioned dim taken whole", "[ops][localargs]") {
  OneNode s("aten::slice", {{4, 8}}, {{4, 8}},
            {{"self", TensorRef{0}},
             {"dim", int64_t{1}},
             {"start", int64_t{0}},
             {"end", int64_t{9223372036854775807}},
             {"step", int64_t{1}}});
  auto a = s.local({{4, 4}}, {{4, 4}});
  CHECK(intOf(a, "start") == 0);
  CHECK(intOf(a, "end") == 4);
  // A dim that is not partitioned keeps its bounds.
  CHECK(intOf(s.local({{2, 8}}, {{2, 8}}), "end") == 9223372036854775807);
  OneNode cut("aten::slice", {{4, 8}}, {{4, 3}},
              {{"self", TensorRef{0}},
               {"dim", int64_t{1}},
               {"start", int64_t{2}},
               {"end", int64_t{5}},
               {"step", int64_t{1}}});
  CHECK(intOf(cut.local({{2, 8}}, {{2, 3}}), "start") == 2);
  Status st = cut.error({{4, 4}}, {{4, 3}});
  CHECK(st.message() == "error: aten::slice at model.py:7: dim 1 is partitioned (4 of 8) but the "
                        "op cuts [3] out of it; local bounds would depend on the device's offset");
  OneNode n(
      "aten::narrow", {{6, 4}}, {{6, 4}},
      {{"self", TensorRef{0}}, {"dim", int64_t{0}}, {"start", int64_t{0}}, {"length", int64_t{6}}});
  CHECK(intOf(n.local({{3, 4}}, {{3, 4}}), "length") == 3);
}

TEST_CASE("localizeArgs: creation sizes, arange, unflatten, repeat", "[ops][localargs]") {
  OneNode z("aten::zeros", {}, {{4, 6}},
            {{"size", std::vector<int64_t>{4, 6}}, {"dtype", DType::Float32}});
  CHECK(ints(z.local({}, {{4, 3}}), "size") == std::vector<int64_t>{4, 3});
  OneNode f("aten::full", {}, {{4, 6}},
            {{"size", std::vector<int64_t>{4, 6}}, {"fill_value", 1.5}});
  auto fa = f.local({}, {{2, 6}});
  CHECK(ints(fa, "size") == std::vector<int64_t>{2, 6});
  CHECK(std::get<double>(argNamed(fa, "fill_value")) == 1.5);
  OneNode o("aten::new_ones", {{3}}, {{4, 6}},
            {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{4, 6}}});
  CHECK(ints(o.local({{3}}, {{4, 2}}), "size") == std::vector<int64_t>{4, 2});
  OneNode a("aten::arange", {}, {{8}},
            {{"start", int64_t{2}}, {"end", int64_t{18}}, {"step", int64_t{2}}});
  CHECK(intOf(a.local({}, {{4}}), "end") == 10);
  OneNode af("aten::arange", {}, {{8}}, {{"end", 8.0}});
  CHECK(std::get<double>(argNamed(af.local({}, {{2}}), "end")) == 2.0);
  OneNode u("aten::unflatten", {{4, 12}}, {{4, 3, 4}},
            {{"self", TensorRef{0}}, {"dim", int64_t{1}}, {"sizes", std::vector<int64_t>{3, -1}}});
  CHECK(ints(u.local({{4, 6}}, {{4, 3, 2}}), "sizes") == std::vector<int64_t>{3, 2});
  OneNode fl("aten::flatten", {{4, 3, 4}}, {{4, 12}},
             {{"self", TensorRef{0}}, {"start_dim", int64_t{1}}, {"end_dim", int64_t{-1}}});
  CHECK(intOf(fl.local({{2, 3, 4}}, {{2, 12}}), "start_dim") == 1);
  OneNode r("aten::repeat", {{4, 6}}, {{2, 4, 12}},
            {{"self", TensorRef{0}}, {"repeats", std::vector<int64_t>{2, 1, 2}}});
  CHECK(ints(r.local({{2, 6}}, {{2, 2, 12}}), "repeats") == std::vector<int64_t>{2, 1, 2});
  CHECK(r.error({{2, 6}}, {{2, 4, 12}}).message().find("is not local input [2, 6] repeated") !=
        std::string::npos);
}

TEST_CASE("localizeArgs rejects shapes that do not match the node", "[ops][localargs]") {
  OneNode v("aten::view", {{8, 6}}, {{48}},
            {{"self", TensorRef{0}}, {"size", std::vector<int64_t>{48}}});
  CHECK(v.error({{8, 6}, {1}}, {{48}}).kind() == ErrorKind::Internal);
  CHECK(v.error({{8}}, {{48}}).kind() == ErrorKind::Internal);
}
