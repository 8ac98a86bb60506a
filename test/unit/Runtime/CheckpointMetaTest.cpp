// rank{r}.json read from text (fuzz/FuzzCheckpointMeta.cpp's findings).
#include "../CatchCompat.h"

#include "nnsc/Runtime/CheckpointMeta.h"

using namespace nnsc;

namespace {

std::string metaWith(const std::string &step, const std::string &shardField = "",
                     const std::string &position = "", const std::string &ranks = "1") {
  return R"({"step": )" + step + R"(, "data_position": )" + (position.empty() ? step : position) +
         R"(,
    "lr_schedule": {"name": "constant", "base_lr": 0.1, "last_lr": 0.1},
    "rng_state": "0a1b", "config_hash": "h", "rank": 0, "world_size": )" +
         ranks + R"(, "dp_size": 1,
    "dp_rank": 0, "plan_ngpus": 1, "shards": [{"local_name": "p0", "original_name": "w",
    "aliases": [], "full_shape": [4], "shape": [4], "start": [0], "stop": [4],
    "value_index": 0, "value_chunks": 1, "dtype": "F32", "trainable": true, "replicas": 1)" +
         shardField + "}]}";
}

} // namespace

TEST_CASE("checkpoint metadata reads back what it writes", "[checkpoint]") {
  auto meta = rt::parseCheckpointMeta(metaWith("7"), "rank0.json");
  REQUIRE(meta);
  CHECK(meta->step == 7);
  CHECK(meta->rngState == std::string("\x0a\x1b"));
  REQUIRE(meta->shards.size() == 1);
  auto again = rt::parseCheckpointMeta(rt::checkpointMetaText(*meta), "rank0.json");
  REQUIRE(again);
  CHECK(rt::checkpointMetaText(*again) == rt::checkpointMetaText(*meta));
}

TEST_CASE("checkpoint metadata holds the CUDA generator's state of a run on cuda",
          "[checkpoint]") {
  auto meta = rt::parseCheckpointMeta(metaWith("3"), "rank0.json");
  REQUIRE(meta);
  CHECK(meta->cudaRngState.empty()); // a checkpoint written on cpu has none
  CHECK(rt::checkpointMetaText(*meta).find("cuda_rng_state") == std::string::npos);
  meta->cudaRngState = std::string("\x00\x07\xfe", 3);
  std::string text = rt::checkpointMetaText(*meta);
  CHECK(text.find(R"("cuda_rng_state": "0007fe")") != std::string::npos);
  auto again = rt::parseCheckpointMeta(text, "rank0.json");
  REQUIRE(again);
  CHECK(again->cudaRngState == std::string("\x00\x07\xfe", 3));
}

// Found by fuzz-checkpoint_meta: a step of 2.6e34 was cast to int64 (UB).
TEST_CASE("checkpoint metadata refuses numbers that are not integers of the field's range",
          "[checkpoint]") {
  for (const char *bad : {"26666666666666666666666666666666660", "2.5", "18446744073709551615"}) {
    auto meta = rt::parseCheckpointMeta(metaWith(bad), "ck/rank0.json");
    REQUIRE_FALSE(meta);
    CHECK_THAT(meta.status().message(),
               Catch::Matchers::ContainsSubstring("ck/rank0.json: error: bad checkpoint "
                                                  "metadata") &&
                   Catch::Matchers::ContainsSubstring("'step' must be an integer"));
  }
  auto shard = rt::parseCheckpointMeta(metaWith("1", R"(, "reducer": 4294967296)"), "r.json");
  REQUIRE_FALSE(shard);
  CHECK_THAT(shard.status().message(),
             Catch::Matchers::ContainsSubstring("'reducer' must be an integer from "
                                                "-2147483648 to 2147483647"));
  auto dims = rt::parseCheckpointMeta(metaWith("1", R"(, "blocks": [1e300])"), "r.json");
  REQUIRE_FALSE(dims);
  CHECK_THAT(dims.status().message(),
             Catch::Matchers::ContainsSubstring("'blocks' must be an integer"));
}

// Found by the hostile corpus: a data_position of 2^62 was resumed from (a
// loop that never ended), a world_size of 1e9 had merge look for a billion
// rank files.
TEST_CASE("checkpoint metadata bounds the counts a resume or a merge loops over",
          "[checkpoint]") {
  auto far = rt::parseCheckpointMeta(metaWith("2", "", "4611686018427387904"), "ck/rank0.json");
  REQUIRE_FALSE(far);
  CHECK_THAT(far.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "ck/rank0.json: error: bad checkpoint metadata: data_position "
                 "4611686018427387904 disagrees with step 2"));
  for (const char *ranks : {"0", "-1", "1000000000"}) {
    auto meta = rt::parseCheckpointMeta(metaWith("2", "", "", ranks), "ck/rank0.json");
    REQUIRE_FALSE(meta);
    CHECK_THAT(meta.status().message(),
               Catch::Matchers::ContainsSubstring(std::string("world_size ") + ranks +
                                                  "; expected 1 to 131072 ranks"));
  }
  CHECK(rt::parseCheckpointMeta(metaWith("2", "", "", "131072"), "ck/rank0.json"));
}

// ZeRO in blocks: zero_ngroups is written only above 1, read back, and bounded by
// the ranks.
TEST_CASE("checkpoint metadata records ZeRO's blocks", "[checkpoint][zero]") {
  auto fourCopies = [] {
    std::string t = metaWith("2", "", "", "4");
    t.replace(t.find(R"("dp_size": 1)"), 12, R"("dp_size": 4)");
    return t;
  };
  std::string text = fourCopies();
  text.insert(1, R"("zero": 1, "zero_ngroups": 2, )");
  auto meta = rt::parseCheckpointMeta(text, "ck/rank0.json");
  REQUIRE(meta);
  CHECK(meta->zeroNgroups == 2);
  CHECK_THAT(rt::checkpointMetaText(*meta), Catch::Matchers::ContainsSubstring("zero_ngroups"));
  meta->zeroNgroups = 1;
  CHECK_THAT(rt::checkpointMetaText(*meta), !Catch::Matchers::ContainsSubstring("zero_ngroups"));
  CHECK(rt::parseCheckpointMeta(metaWith("2", "", "", "4"), "r.json")->zeroNgroups == 1);
  std::string bad = fourCopies();
  bad.insert(1, R"("zero": 1, "zero_ngroups": 8, )");
  auto refused = rt::parseCheckpointMeta(bad, "ck/rank0.json");
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.status().message(),
             Catch::Matchers::ContainsSubstring(
                 "ck/rank0.json: error: bad checkpoint metadata: zero_ngroups is 8 for 4 ranks"));
  std::string uneven = fourCopies();
  uneven.insert(1, R"("zero": 1, "zero_ngroups": 3, )");
  CHECK_FALSE(rt::parseCheckpointMeta(uneven, "ck/rank0.json"));
}

// checkpoint.save_best: the best validation so far travels with every checkpoint, at or before
// its step.
TEST_CASE("checkpoint metadata records the best validation so far", "[checkpoint]") {
  std::string text = metaWith("12");
  text.insert(1, R"("best_validation": {"step": 8, "val_loss": 3.5619}, )");
  auto meta = rt::parseCheckpointMeta(text, "ck/rank0.json");
  REQUIRE(meta);
  REQUIRE(meta->best);
  CHECK(meta->best->step == 8);
  CHECK(meta->best->valLoss == 3.5619);
  auto again = rt::parseCheckpointMeta(rt::checkpointMetaText(*meta), "ck/rank0.json");
  REQUIRE(again);
  REQUIRE(again->best);
  CHECK(again->best->valLoss == 3.5619);
  CHECK_FALSE(rt::parseCheckpointMeta(metaWith("12"), "ck/rank0.json")->best);
  for (const char *bad : {R"({"step": 13, "val_loss": 3.5})", R"({"step": 0, "val_loss": 3.5})",
                          R"({"step": 8, "val_loss": null})"}) {
    std::string t = metaWith("12");
    t.insert(1, std::string(R"("best_validation": )") + bad + ", ");
    auto refused = rt::parseCheckpointMeta(t, "ck/rank0.json");
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.status().message(),
               Catch::Matchers::ContainsSubstring("ck/rank0.json: error: bad checkpoint metadata"));
  }
}
