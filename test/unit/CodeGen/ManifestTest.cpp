#include "../CatchCompat.h"

#include <filesystem>
#include <sstream>

#include "nnsc/CodeGen/Manifest.h"
#include "nnsc/CodeGen/Shards.h"
#include "nnsc/Plan/Plan.h"

using namespace nnsc;
using namespace nnsc::ir;

namespace {

// w[3, 2] (tied with head.w), frozen f[2], buffer m[2], constant k[2] used by one node.
Graph stateGraph() {
  Graph g;
  g.name = "State";
  float kv[2] = {7.f, 8.f};
  int64_t w =
      g.addTensor({-1, "w", {3, 2}, DType::Float32, true, TensorKind::Param, {"head.w"}, {}});
  int64_t f = g.addTensor({-1, "f", {2}, DType::Float32, false, TensorKind::Param, {}, {}});
  int64_t m = g.addTensor({-1, "m", {2}, DType::Float32, false, TensorKind::Buffer, {}, {}});
  int64_t k = g.addTensor({-1,
                           "k",
                           {2},
                           DType::Float32,
                           false,
                           TensorKind::Constant,
                           {},
                           std::string(reinterpret_cast<const char *>(kv), 8)});
  int64_t x = g.addTensor({-1, "x", {5, 2}, DType::Float32, false, TensorKind::Input, {}, {}});
  int64_t y = g.addTensor({-1, "y", {5, 3}, DType::Float32, false, TensorKind::Activation, {}, {}});
  Node n;
  n.op = "myops::f";
  n.inputs = {x, w, f, m, k};
  n.outputs = {y};
  n.args = {{"xs", TensorListRef{{0, 1, 2, 3, 4}}}};
  g.addNode(n);
  g.inputs = {x};
  g.outputs = {y};
  g.lossOutput = -1;
  g.weightsWritten = true;
  return g;
}

codegen::RankLayout layoutOf(const Graph &g, int ngpus, int rank) {
  plan::PlanOptions o;
  o.runtimeNgpus = ngpus;
  return *codegen::layoutRank(g, *plan::makePlan(g, o), rank);
}

} // namespace

TEST_CASE("manifest: shards, data-parallel group and one averaging reducer", "[codegen]") {
  Graph g = stateGraph();
  auto m = codegen::buildManifest(g, layoutOf(g, 4, 3), {1 << 20, true});
  CHECK(m.rank() == 3);
  CHECK(m.world_size() == 4);
  CHECK(m.dp_size() == 4);
  CHECK(m.dp_rank() == 3);
  CHECK(m.plan_ngpus() == 1);
  CHECK(m.program() == "rank3.py");
  CHECK(m.weights() == "rank3.safetensors");
  CHECK(m.entry() == "forward");
  CHECK(m.num_outputs() == 1);
  CHECK(m.loss_output() == -1);
  REQUIRE(m.shards_size() == 4);
  CHECK(m.shards(0).original_name() == "w");
  CHECK(m.shards(0).aliases(0) == "head.w");
  CHECK(m.shards(0).trainable());
  CHECK(m.shards(0).reducer() == 0);
  CHECK(m.shards(0).slice().stop(0) == 3);
  CHECK(m.shards(0).slice().value_chunks() == 1);
  CHECK_FALSE(m.shards(1).trainable()); // frozen parameter
  CHECK(m.shards(1).reducer() == -1);
  CHECK(m.shards(3).original_name() == "__const.3");
  CHECK(m.shards(3).constant());
  REQUIRE(m.groups_size() == 1);
  CHECK(std::vector<int>(m.groups(0).ranks().begin(), m.groups(0).ranks().end()) ==
        std::vector<int>{0, 1, 2, 3});
  REQUIRE(m.reducers_size() == 1);
  CHECK(m.reducers(0).shards_size() == 1);
  CHECK(m.reducers(0).bucket_bytes() == 1 << 20);
  CHECK(m.reducers(0).average());
  CHECK(m.inputs(0).batch_dim() == 0);

  std::ostringstream text;
  codegen::printManifest(m, text);
  CHECK(text.str().find("shard  p0 w: float32[3, 2] of [3, 2] at [0:3, 0:2] trainable reducer 0 "
                        "replicas 1 (alias head.w)\n") != std::string::npos);
  CHECK(text.str().find("shard  c3 __const.3: float32[2] of [2] at [0:2] constant") !=
        std::string::npos);
  CHECK(codegen::manifestToJson(m).find("\"original_name\": \"__const.3\"") != std::string::npos);
}

TEST_CASE("manifest without weights names no weights file", "[codegen]") {
  Graph g = stateGraph();
  auto m = codegen::buildManifest(g, layoutOf(g, 1, 0), {1 << 20, false});
  CHECK(m.weights().empty());
}

TEST_CASE("sliceTensor copies any box of a row-major tensor", "[codegen]") {
  Shape full{3, 4, 5};
  std::vector<int32_t> data(60);
  for (int i = 0; i < 60; ++i)
    data[static_cast<size_t>(i)] = i;
  std::string_view bytes(reinterpret_cast<const char *>(data.data()), 240);
  auto check = [&](std::vector<int64_t> start, std::vector<int64_t> stop) {
    std::string got = codegen::sliceTensor(bytes, full, 4, start, stop);
    std::vector<int32_t> want;
    for (int64_t i = start[0]; i < stop[0]; ++i)
      for (int64_t j = start[1]; j < stop[1]; ++j)
        for (int64_t k = start[2]; k < stop[2]; ++k)
          want.push_back(static_cast<int32_t>(i * 20 + j * 5 + k));
    REQUIRE(got.size() == want.size() * 4);
    CHECK(std::memcmp(got.data(), want.data(), got.size()) == 0);
  };
  check({0, 0, 0}, {3, 4, 5});
  check({1, 0, 0}, {2, 4, 5});
  check({0, 1, 0}, {3, 3, 5});
  check({0, 0, 2}, {3, 4, 4});
  check({2, 3, 4}, {3, 4, 5});
  CHECK(codegen::sliceTensor(bytes, full, 4, {0, 2, 0}, {3, 2, 5}).empty());
}

TEST_CASE("rank shards come from the weights (by name or alias) and the graph", "[codegen]") {
  Graph g = stateGraph();
  auto dir = std::filesystem::temp_directory_path();
  std::string wpath = (dir / "nnsc-unit-weights.safetensors").string();
  float w[6] = {1, 2, 3, 4, 5, 6}, f[2] = {9, 10}, m[2] = {11, 12};
  auto view = [](const float *p, size_t n) {
    return std::string_view(reinterpret_cast<const char *>(p), n * 4);
  };
  REQUIRE(writeSafetensors(wpath, {{"head.w", "F32", {3, 2}, view(w, 6)},
                                   {"f", "F32", {2}, view(f, 2)},
                                   {"m", "F32", {2}, view(m, 2)}})
              .isOk());
  auto weights = SafetensorsFile::open(wpath);
  REQUIRE(weights.isOk());
  std::string out = (dir / "nnsc-unit-rank0.safetensors").string();
  REQUIRE(codegen::writeRankShards(out, g, layoutOf(g, 1, 0), **weights, wpath).isOk());
  auto shards = SafetensorsFile::open(out);
  REQUIRE(shards.isOk());
  REQUIRE((*shards)->entries().size() == 4);
  CHECK((*shards)->find("p0")->bytes == view(w, 6));
  CHECK((*shards)->find("p2")->bytes == view(m, 2));
  float k[2] = {7, 8};
  CHECK((*shards)->find("c3")->bytes == view(k, 2));

  REQUIRE(writeSafetensors(wpath, {{"f", "F32", {2}, view(f, 2)}}).isOk());
  auto partial = SafetensorsFile::open(wpath);
  Status st = codegen::writeRankShards(out, g, layoutOf(g, 1, 0), **partial, wpath);
  CHECK(st.message() == wpath + ": error: no tensor 'w' in the weights");
}

namespace {

// A two-stage pipeline's manifest for `rank`: one chunk that receives (stage
// 1) or sends (stage 0) tensor t0 from or to the other rank, and its steps for
// micro-batches `micros` in order, forward then backward.
proto::RankManifest pipeRank(int rank, const std::vector<std::pair<int, bool>> &passes) {
  proto::RankManifest m;
  m.set_rank(rank);
  m.set_world_size(2);
  m.set_format_version(codegen::kManifestFormatVersion);
  m.mutable_pipeline()->set_stages(2);
  proto::PipeChunk &c = *m.mutable_pipeline()->add_chunks();
  c.set_stage(rank);
  proto::PipeTensor &t = rank == 0 ? *c.add_send() : *c.add_recv();
  t.set_name("t0");
  t.set_peer(1 - rank);
  t.set_peer_stage(1 - rank);
  t.set_tag(7);
  t.set_requires_grad(true);
  auto add = [&](proto::PipeStep::Kind kind, int micro) {
    proto::PipeStep &s = *m.mutable_pipeline()->add_steps();
    s.set_kind(kind);
    s.set_micro(micro);
    s.set_chunk(0);
  };
  for (auto [micro, forward] : passes) {
    if (forward)
      add(rank == 0 ? proto::PipeStep::SEND_ACTIVATIONS : proto::PipeStep::RECV_ACTIVATIONS, micro);
    else
      add(rank == 0 ? proto::PipeStep::RECV_GRADIENTS : proto::PipeStep::SEND_GRADIENTS, micro);
  }
  return m;
}

} // namespace

TEST_CASE("pipeline channels: both ends must list their transfers in one order", "[codegen]") {
  // 1F1B on two stages: stage 0 runs F0 F1 B0 F2 B1 B2, stage 1 F0 B0 F1 B1 F2 B2. Per
  // channel (values 0 -> 1, gradients 1 -> 0) the orders agree, though not across them.
  proto::RankManifest s0 =
      pipeRank(0, {{0, true}, {1, true}, {0, false}, {2, true}, {1, false}, {2, false}});
  proto::RankManifest s1 =
      pipeRank(1, {{0, true}, {0, false}, {1, true}, {1, false}, {2, true}, {2, false}});
  CHECK(codegen::checkPipelineChannels({&s0, &s1}).isOk());

  // Stage 1 taking micro-batch 1's gradient out of turn: the gradients' channel disagrees.
  proto::RankManifest swapped =
      pipeRank(1, {{0, true}, {1, true}, {1, false}, {0, false}, {2, true}, {2, false}});
  Status st = codegen::checkPipelineChannels({&s0, &swapped});
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(),
             Catch::Matchers::ContainsSubstring(
                 "gradients from rank 1 (virtual stage 1) to rank 0 (virtual stage 0), training "
                 "schedule, are not received in the order they are sent: transfer 0 is tag 7 of "
                 "micro-batch 1 at rank 1 and tag 7 of micro-batch 0 at rank 0"));

  // A transfer one end never makes.
  proto::RankManifest short1 = pipeRank(1, {{0, true}, {0, false}, {1, true}, {1, false}});
  st = codegen::checkPipelineChannels({&s0, &short1});
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring(
                               "transfer 2 is tag 7 of micro-batch 2 at rank 0 and nothing"));
}
