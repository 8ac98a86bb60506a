// Dataset offsets (exact values a Python reference reproduces), token
// files, synthetic tokens and the LR schedule.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "nnsc/Runtime/Dataset.h"
#include "nnsc/Runtime/LrSchedule.h"
#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/Support/File.h"

using namespace nnsc;
using namespace nnsc::rt;

TEST_CASE("data: global sample index and offsets", "[runtime][data]") {
  SampleLayout l{2, 2, 2, 1}; // B=2, accum=2, dp=2, dp_rank=1
  CHECK(globalSampleIndex(l, 3, 1, 0) == 30);
  CHECK(globalSampleIndex(l, 3, 1, 1) == 31);
  CHECK(globalSampleIndex(l, 0, 0, 0) == 2);
  // (g * 2654435761 + seed * 97) mod (N - T - 1), N = 1000, T = 8, seed = 1337
  CHECK(sampleOffset(30, 1337, 1000, 8) == 209);
  CHECK(sampleOffset(31, 1337, 1000, 8) == 848);
  CHECK(sampleOffset(0, 1337, 1000, 8) == 859);
  CHECK(sampleOffset(4294967295ull, 1337, 1000, 8) == 393); // no overflow below 2^32
}

TEST_CASE("data: token file batches", "[runtime][data]") {
  auto dir = std::filesystem::temp_directory_path() / "nnsc-data-test";
  std::filesystem::create_directories(dir);
  std::string bytes;
  for (int k = 0; k < 1000; ++k) { // token k = k * 7 mod 65536
    uint16_t v = uint16_t(k * 7);
    bytes += char(v & 0xff);
    bytes += char(v >> 8);
  }
  std::string path = (dir / "train.bin").string();
  REQUIRE(writeFileAtomic(path, bytes).isOk());
  auto src = openTokenFile(path, "uint16");
  REQUIRE(src.isOk());
  CHECK((*src)->size() == 1000);
  auto ds = TokenDataset::create(*src, 8, 1337, path);
  REQUIRE(ds.isOk());
  TokenBatch b = ds->trainBatch({2, 2, 2, 1}, 3, 1);
  REQUIRE(b.x.size() == 16);
  CHECK(b.x[0] == 209 * 7);
  CHECK(b.y[0] == 210 * 7);
  CHECK(b.x[8] == 848 * 7);
  CHECK(b.y[15] == (848 + 8) * 7);
  TokenBatch v = ds->valBatch({2, 2, 2, 1}, 3); // step 3, accum 1: g = (3*2+1)*2 = 14
  CHECK(v.x[0] == int64_t(sampleOffset(14, 1337, 1000, 8)) * 7);

  CHECK(!TokenDataset::create(*src, 999, 0, path).isOk());
  auto missing = openTokenFile((dir / "none.bin").string(), "uint16");
  REQUIRE(!missing.isOk());
  CHECK_THAT(missing.status().message(), Catch::Contains("cannot open token file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("data: synthetic tokens are deterministic and in range", "[runtime][data]") {
  auto a = syntheticTokens(65, 3), b = syntheticTokens(65, 3), c = syntheticTokens(65, 4);
  bool differs = false;
  for (uint64_t k = 0; k < 100; ++k) {
    CHECK(a->at(k) == b->at(k));
    CHECK((a->at(k) >= 0 && a->at(k) < 65));
    differs |= a->at(k) != c->at(k);
  }
  CHECK(differs);
}

TEST_CASE("lr schedule: warmup, cosine decay, floor", "[runtime][lr]") {
  LrScheduleConfig cfg;
  cfg.name = "cosine";
  cfg.warmupSteps = 10;
  cfg.decaySteps = 110;
  cfg.minLr = 1e-4;
  LrSchedule s(cfg, 1e-3, 200);
  CHECK(s.at(0) == 1e-3 * 1.0 / 11.0);
  CHECK(s.at(9) == 1e-3 * 10.0 / 11.0);
  CHECK(s.at(10) == 1e-3);
  CHECK(s.at(60) == Approx(1e-4 + 0.5 * (1e-3 - 1e-4)).epsilon(1e-12));
  CHECK(s.at(110) == Approx(1e-4).epsilon(1e-12));
  CHECK(s.at(111) == 1e-4);
  CHECK(s.at(35) == 1e-4 + 0.5 * (1.0 + std::cos(M_PI * 0.25)) * (1e-3 - 1e-4));

  LrScheduleConfig constant;
  constant.warmupSteps = 4;
  LrSchedule k(constant, 0.5, 10);
  CHECK(k.at(1) == 0.5 * 2.0 / 5.0);
  CHECK(k.at(4) == 0.5);
  CHECK(k.at(100) == 0.5);
}
