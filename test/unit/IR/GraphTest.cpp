#include "../CatchCompat.h"

#include <filesystem>

#include "nnsc/IR/Printer.h"
#include "nnsc/IR/Serialize.h"
#include "nnsc/Support/File.h"
#include "nnsc/graph.pb.h"

using namespace nnsc;
using namespace nnsc::ir;

namespace {

// x[4, 8] @ linear(w[16, 8]) -> y[4, 16]; loss = y.sum()
Graph tinyGraph() {
  Graph g;
  g.name = "Tiny";
  g.source = "tiny.pt";
  int64_t x = g.addTensor({-1, "x", {4, 8}, DType::Float32, false, TensorKind::Input, {}, {}});
  int64_t w = g.addTensor(
      {-1, "fc.weight", {16, 8}, DType::Float32, true, TensorKind::Param, {"head.weight"}, {}});
  int64_t y =
      g.addTensor({-1, "y", {4, 16}, DType::Float32, false, TensorKind::Activation, {}, {}});
  int64_t l = g.addTensor({-1, "loss", {}, DType::Float32, false, TensorKind::Activation, {}, {}});
  Node lin;
  lin.op = "aten::linear";
  lin.inputs = {x, w};
  lin.outputs = {y};
  lin.args = {{"input", TensorRef{0}}, {"weight", TensorRef{1}}, {"bias", NoneValue{}}};
  lin.annotations = {"* k+, n k+ -> * n"};
  lin.modulePath = "fc";
  lin.moduleClass = "Linear";
  lin.loc = {"model.py", 12, 0};
  g.addNode(lin);
  Node sum;
  sum.op = "aten::sum";
  sum.inputs = {y};
  sum.outputs = {l};
  sum.args = {{"self", TensorRef{0}},
              {"dtype", DType::Float32},
              {"scale", 0.5},
              {"dims", std::vector<int64_t>{0, 1}}};
  g.addNode(sum);
  g.inputs = {x};
  g.outputs = {l};
  g.lossOutput = 0;
  return g;
}

} // namespace

TEST_CASE("graph text form is stable and names what matters") {
  std::string text = printGraph(tinyGraph());
  CHECK(text == "graph Tiny (format 1) from tiny.pt; weights not written\n"
                "input    %0 x: float32[4, 8]\n"
                "param    %1 fc.weight: float32[16, 8] grad (alias head.weight)\n"
                "%2: float32[4, 16] = aten::linear(input=%0, weight=%1, bias=None)\n"
                "    # fc (Linear) model.py:12\n"
                "    anno: * k+, n k+ -> * n\n"
                "%3: float32[] = aten::sum(self=%2, dtype=float32, scale=0.5, dims=[0, 1])\n"
                "    # <top> <unknown>\n"
                "    anno: replicate-only\n"
                "output %3 (loss)\n");
}

TEST_CASE("graph survives a protobuf round trip through a file") {
  Graph g = tinyGraph();
  std::string path = (std::filesystem::temp_directory_path() / "nnsc-unit-graph.pb").string();
  REQUIRE(writeGraph(g, path).isOk());
  auto back = readGraph(path);
  REQUIRE(back.isOk());
  CHECK(printGraph(*back) == printGraph(g));
  CHECK(back->tensor(1).aliases == std::vector<std::string>{"head.weight"});
  CHECK(back->nodes()[0].loc.line == 12);
}

TEST_CASE("empty lists, None entries of tensor lists and state updates survive a round trip") {
  Graph g = tinyGraph();
  int64_t buf = g.addTensor({-1, "bn.steps", {}, DType::Int64, false, TensorKind::Buffer, {}, {}});
  int64_t next = g.addTensor({-1, "next", {}, DType::Int64, false, TensorKind::Activation, {}, {}});
  Node add;
  add.op = "aten::index";
  add.inputs = {buf, buf};
  add.outputs = {next};
  add.args = {{"self", TensorRef{0}},
              {"indices", TensorListRef{{-1, 1}}},
              {"stride", std::vector<int64_t>{}},
              {"scales", std::vector<double>{}},
              {"mask", std::vector<bool>{}}};
  g.addNode(add);
  g.stateUpdates.push_back({buf, next});
  std::string path = (std::filesystem::temp_directory_path() / "nnsc-unit-graph2.pb").string();
  REQUIRE(writeGraph(g, path).isOk());
  auto back = readGraph(path);
  REQUIRE(back.isOk());
  std::string text = printGraph(*back);
  CHECK(text == printGraph(g));
  CHECK(text.find("aten::index(self=%4, indices=[None, %4], stride=[], scales=[], mask=[])") !=
        std::string::npos);
  CHECK(text.find("update %4 'bn.steps' <- %5") != std::string::npos);
}

TEST_CASE("a state update of a tensor that is not a buffer is refused") {
  Graph g = tinyGraph();
  g.stateUpdates.push_back({1, 2}); // fc.weight is a parameter
  std::string path = (std::filesystem::temp_directory_path() / "nnsc-unit-graph3.pb").string();
  REQUIRE(writeGraph(g, path).isOk());
  auto back = readGraph(path);
  REQUIRE_FALSE(back.isOk());
  CHECK_THAT(back.status().message(),
             Catch::Matchers::ContainsSubstring("writes %1 'fc.weight', which is not a buffer"));
}

TEST_CASE("readGraph names the file when it is not a graph") {
  std::string path = (std::filesystem::temp_directory_path() / "nnsc-unit-notgraph.pb").string();
  REQUIRE(writeFileAtomic(path, std::string("\xff\xff\xff garbage", 11)).isOk());
  auto g = readGraph(path);
  REQUIRE_FALSE(g.isOk());
  CHECK(g.status().message().rfind(path + ": error: not an nnsc graph", 0) == 0);
}

// Protobuf has no end marker: a file cut right at a field boundary parses.
// Every prefix of a serialized graph that ends before its outputs is refused,
// with the file named, whether or not protobuf accepts it.
TEST_CASE("a graph file cut short is refused at every length") {
  proto::Graph p;
  toProto(tinyGraph(), p);
  std::string bytes;
  REQUIRE(p.SerializeToString(&bytes));
  proto::Graph head; // what the fields before the outputs serialize to
  head.set_format_version(p.format_version());
  head.set_name(p.name());
  head.set_source(p.source());
  *head.mutable_tensors() = p.tensors();
  *head.mutable_nodes() = p.nodes();
  const size_t beforeOutputs = head.ByteSizeLong();
  REQUIRE(beforeOutputs < bytes.size());
  int parsedByProtobuf = 0;
  for (size_t n = 0; n <= beforeOutputs; ++n) {
    std::string cut = bytes.substr(0, n);
    proto::Graph probe;
    parsedByProtobuf += probe.ParseFromString(cut) ? 1 : 0;
    auto g = parseGraph(cut, "g.pb");
    INFO("cut at " << n << " of " << bytes.size() << " bytes");
    REQUIRE_FALSE(g.isOk());
    CHECK(g.status().message().rfind("g.pb: error: not an nnsc graph", 0) == 0);
  }
  CHECK(parsedByProtobuf > 1); // field boundaries the old check let through
  CHECK(parseGraph(bytes, "g.pb").isOk());
}

TEST_CASE("compact renumbers tensors densely") {
  Graph g = tinyGraph();
  int64_t dead =
      g.addTensor({-1, "dead", {1}, DType::Float32, false, TensorKind::Constant, {}, {}});
  std::vector<bool> keep(g.tensors().size(), true);
  keep[static_cast<size_t>(dead)] = false;
  keep[0] = true;
  g.compact(keep);
  CHECK(g.tensors().size() == 4);
  CHECK(g.nodes()[1].inputs == std::vector<int64_t>{2});
}

TEST_CASE("dtype names parse back") {
  for (DType t : {DType::Float32, DType::BFloat16, DType::Int64, DType::Bool})
    CHECK(parseDType(dtypeName(t)) == t);
  CHECK(parseDType("long") == DType::Int64);
  CHECK_FALSE(parseDType("float33").has_value());
  CHECK(dtypeFromSafetensorsCode(dtypeSafetensorsCode(DType::Float16)) == DType::Float16);
}
