// Checkpoint files and merging: rank files round-trip, hand-made shards
// (slices, value chunks, replicas, aliases) reassemble into the original
// tensors, and the merged file loads in Python with torch.load.
#include "../CatchCompat.h"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

#include <ATen/ATen.h>

#include "nnsc/Runtime/Checkpoint.h"
#include "nnsc/Runtime/CheckpointStore.h"
#include "nnsc/Runtime/MergeCheckpoint.h"

using namespace nnsc;
using namespace nnsc::rt;
namespace fs = std::filesystem;

namespace {

ShardInfo shard(const std::string &local, const std::string &orig, std::vector<int64_t> full,
                std::vector<int64_t> start, std::vector<int64_t> stop, int vi = 0, int vn = 1) {
  ShardInfo s;
  s.localName = local;
  s.originalName = orig;
  s.fullShape = std::move(full);
  s.start = std::move(start);
  s.stop = std::move(stop);
  for (size_t d = 0; d < s.start.size(); ++d)
    s.shape.push_back(s.stop[d] - s.start[d]);
  s.valueIndex = vi;
  s.valueChunks = vn;
  return s;
}

// w: [4, 6] split in rows over ranks 0/1, rank 2 a replica of rank 0;
// b: [6] as two partial sums; emb: whole, with an alias.
std::vector<ShardPiece> handMade(const at::Tensor &w, const at::Tensor &b, const at::Tensor &emb) {
  at::Tensor part = at::arange(6, at::kFloat) * 0.25;
  ShardInfo e = shard("p9", "wte.weight", {3, 2}, {0, 0}, {3, 2});
  e.aliases = {"lm_head.weight"};
  return {
      {shard("p0", "w", {4, 6}, {0, 0}, {2, 6}), w.narrow(0, 0, 2).clone(), 0},
      {shard("p0", "w", {4, 6}, {2, 0}, {4, 6}), w.narrow(0, 2, 2).clone(), 1},
      {shard("p0", "w", {4, 6}, {0, 0}, {2, 6}), w.narrow(0, 0, 2).clone(), 2},
      {shard("p1", "b", {6}, {0}, {6}, 0, 2), part, 0},
      {shard("p1", "b", {6}, {0}, {6}, 1, 2), b - part, 1},
      {e, emb.clone(), 0},
  };
}

} // namespace

TEST_CASE("merge: slices, value chunks, replicas and aliases", "[runtime][merge]") {
  at::Tensor w = at::arange(24, at::kFloat).reshape({4, 6});
  at::Tensor b = at::arange(6, at::kFloat) + 10;
  at::Tensor emb = at::arange(6, at::kFloat).reshape({3, 2});
  auto merged = assembleShards(handMade(w, b, emb));
  REQUIRE(merged.isOk());
  CHECK(merged->size() == 4);
  CHECK(at::equal(merged->at("w"), w));
  CHECK(at::allclose(merged->at("b"), b));
  CHECK(at::equal(merged->at("wte.weight"), emb));
  CHECK(at::equal(merged->at("lm_head.weight"), emb));
}

TEST_CASE("merge: gaps, overlaps and differing replicas are errors", "[runtime][merge]") {
  at::Tensor w = at::arange(24, at::kFloat).reshape({4, 6});
  at::Tensor b = at::arange(6, at::kFloat), emb = at::zeros({3, 2});
  auto pieces = handMade(w, b, emb);
  auto gap = pieces;
  gap.erase(gap.begin() + 1);
  auto r = assembleShards(gap);
  REQUIRE(!r.isOk());
  CHECK_THAT(r.status().message(),
             Catch::Matchers::ContainsSubstring("value chunk 0 of 'w' covers 12 of its 24"));

  auto overlap = pieces;
  overlap[1].info = shard("p0", "w", {4, 6}, {1, 0}, {3, 6});
  r = assembleShards(overlap);
  REQUIRE(!r.isOk());
  CHECK_THAT(r.status().message(), Catch::Matchers::ContainsSubstring("shards of 'w' overlap"));

  auto differ = pieces;
  differ[2].value = differ[2].value + 1;
  r = assembleShards(differ);
  REQUIRE(!r.isOk());
  CHECK_THAT(r.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "replicas of 'w' [0:2, 0:6] differ between rank 0 and rank 2"));

  auto misfit = pieces;
  misfit[0].value = at::zeros({3, 6});
  r = assembleShards(misfit);
  REQUIRE(!r.isOk());
  CHECK_THAT(r.status().message(), Catch::Matchers::ContainsSubstring("does not fit 'w'"));
}

TEST_CASE("merge: interleaved shards go back to their rows of every block", "[runtime][merge]") {
  // w: [6, 2] as 3 blocks of 2 rows (a fused q/k/v); rank r holds row r of each block.
  at::Tensor w = at::arange(12, at::kFloat).reshape({6, 2});
  auto piece = [&](int r) {
    ShardInfo s = shard("p0", "w", {6, 2}, {r, 0}, {r + 1, 2});
    s.blocks = {3, 1};
    s.shape = {3, 2};
    at::Tensor rows = at::stack({w[r], w[2 + r], w[4 + r]});
    return ShardPiece{s, rows, r};
  };
  std::vector<ShardPiece> pieces{piece(0), piece(1)};
  auto merged = assembleShards(pieces);
  INFO((merged ? "" : merged.status().message()));
  REQUIRE(merged.isOk());
  CHECK(at::equal(merged->at("w"), w));

  auto mixed = pieces; // one rank cut contiguously, the other interleaved
  mixed[1].info.blocks = {};
  auto r = assembleShards(mixed);
  REQUIRE(!r.isOk());
  CHECK_THAT(r.status().message(),
             Catch::Matchers::ContainsSubstring("disagree on full shape, dtype, value chunks "
                                                "or interleaved blocks (rank 0 and rank 1)"));

  auto twice = pieces; // both ranks claim row 0 of every block
  twice[1] = piece(0);
  twice[1].rank = 1;
  twice[1].value = twice[1].value + 1;
  r = assembleShards(twice);
  REQUIRE(!r.isOk());
  CHECK_THAT(r.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "replicas of 'w' [0:1 of 3 blocks, 0:2] differ between rank 0 and "
                 "rank 1"));
}

TEST_CASE("checkpoint: rank files round trip and merge from a directory", "[runtime][merge]") {

  fs::path run = fs::temp_directory_path() / fmt::format("nnsc-merge-{}", ::getpid());
  fs::remove_all(run);
  std::string dir = checkpointDir(run.string(), 7);
  REQUIRE(fs::create_directories(dir));
  at::Tensor w = at::arange(24, at::kFloat).reshape({4, 6});
  at::Tensor b = at::arange(6, at::kFloat) + 10, emb = at::ones({3, 2});
  auto pieces = handMade(w, b, emb);
  for (int r = 0; r < 3; ++r) {
    RankState st;
    st.meta.step = 7;
    st.meta.dataPosition = 7;
    st.meta.rank = r;
    st.meta.worldSize = 3;
    st.meta.rngState = std::string("\x00\x01\xff", 3);
    for (const auto &p : pieces)
      if (p.rank == r) {
        st.meta.shards.push_back(p.info);
        st.shards[p.info.localName] = p.value;
      }
    st.optimizer["p0/exp_avg"] = at::full({2, 6}, 0.5);
    REQUIRE(writeRankCheckpoint(dir, r, st).isOk());
  }
  auto back = readRankCheckpoint(dir, 1);
  REQUIRE(back.isOk());
  CHECK(back->meta.step == 7);
  CHECK(back->meta.rngState == std::string("\x00\x01\xff", 3));
  CHECK(back->meta.shards.size() == 2);
  CHECK(at::equal(back->shards.at("p0"), w.narrow(0, 2, 2)));
  CHECK(at::equal(back->optimizer.at("p0/exp_avg"), at::full({2, 6}, 0.5)));

  MergeOptions o{run.string(), (run / "merged.pt").string()};
  CHECK(!mergeCheckpoint(o).isOk()); // not complete yet
  REQUIRE(markCheckpointComplete(dir, 7).isOk());
  auto m = mergeCheckpoint(o);
  REQUIRE(m.isOk());
  CHECK(m->ranks == 3);
  CHECK(m->tensors == 3);
  CHECK(m->aliases == 1);
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0) {
    std::string check =
        fmt::format("/usr/bin/python3 -c \"import torch; sd = torch.load('{}', weights_only=True); "
                    "assert sorted(sd) == ['b', 'lm_head.weight', 'w', 'wte.weight'], sorted(sd); "
                    "assert torch.equal(sd['w'], torch.arange(24.).reshape(4, 6)); "
                    "assert torch.allclose(sd['b'], torch.arange(6.) + 10); "
                    "assert sd['wte.weight'].data_ptr() == sd['lm_head.weight'].data_ptr()\"",
                    o.output);
    CHECK(std::system(check.c_str()) == 0);
  }
  fs::remove_all(run);
}

TEST_CASE("merge: a dtype torch.save has no storage for is an error, the old file kept",
          "[runtime][merge]") {
  fs::path dir = fs::temp_directory_path() / fmt::format("nnsc-save-{}", ::getpid());
  fs::create_directories(dir);
  std::string path = (dir / "merged.pt").string();
  REQUIRE(saveStateDict({{"w", at::ones({2, 2})}}, path).isOk());
  auto before = fs::file_size(path);
  Status s =
      saveStateDict({{"w", at::ones({2, 2})}, {"z", at::ones({2}, at::kComplexFloat)}}, path);
  CHECK_FALSE(s.isOk());
  CHECK_THAT(s.message(), Catch::Matchers::ContainsSubstring(
                              "merged.pt: error: cannot save 'z': dtype ComplexFloat"));
  CHECK(fs::file_size(path) == before);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint: CPU generator state round trip", "[runtime][checkpoint]") {
  at::manual_seed(3);
  std::string state = cpuRngState();
  at::Tensor a = at::rand({5});
  REQUIRE(setCpuRngState(state, "test").isOk());
  CHECK(at::equal(at::rand({5}), a));
  Status bad = setCpuRngState("short", "ckpt");
  CHECK_THAT(bad.message(),
             Catch::Matchers::ContainsSubstring("ckpt: error: bad cpu random-generator state"));
  // The device-generic pair is the same generator on cpu.
  REQUIRE(setGeneratorState(c10::Device(c10::kCPU), state, "test").isOk());
  CHECK(generatorState(c10::Device(c10::kCPU)) == state);
  CHECK(at::equal(at::rand({5}), a));
}
