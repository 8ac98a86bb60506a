// Dataset offsets and rows (exact values a Python reference reproduces),
// token files, synthetic tokens, tensor files and the LR schedule.
#include "../CatchCompat.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "nnsc/Runtime/Dataset.h"
#include "nnsc/Runtime/LrSchedule.h"
#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"

using namespace nnsc;
using namespace nnsc::rt;

TEST_CASE("data: global sample index and offsets", "[runtime][data]") {
  SampleLayout l{2, 2, 2, 1}; // B=2, accum=2, dp=2, dp_rank=1
  CHECK(globalSampleIndex(l, 3, 1, 0) == 30);
  CHECK(globalSampleIndex(l, 3, 1, 1) == 31);
  CHECK(globalSampleIndex(l, 0, 0, 0) == 2);
  // mix(g ^ mix(seed)) mod (N - T - 1), N = 1000, T = 8, seed = 1337 (values
  // from test/parity/reference_train.py's mix)
  CHECK(sampleOffset(30, 1337, 1000, 8) == 766);
  CHECK(sampleOffset(31, 1337, 1000, 8) == 844);
  CHECK(sampleOffset(0, 1337, 1000, 8) == 605);
  CHECK(sampleOffset(4294967295ull, 1337, 1000, 8) == 144);
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
  CHECK(b.x[0] == 766 * 7);
  CHECK(b.y[0] == 767 * 7);
  CHECK(b.x[8] == 844 * 7);
  CHECK(b.y[15] == (844 + 8) * 7);
  TokenBatch v = ds->valBatch({2, 2, 2, 1}, 3); // step 3, accum 1: g = (3*2+1)*2 = 14
  CHECK(v.x[0] == int64_t(sampleOffset(14, 1337, 1000, 8)) * 7);

  CHECK(!TokenDataset::create(*src, 999, 0, path).isOk());
  auto missing = openTokenFile((dir / "none.bin").string(), "uint16");
  REQUIRE(!missing.isOk());
  CHECK_THAT(missing.status().message(),
             Catch::Matchers::ContainsSubstring("cannot open token file"));
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

TEST_CASE("data: tensor rows", "[runtime][data]") {
  // Values of test/parity/reference_train.py's row_of, the Python reference's
  // own implementation of the same permutation.
  CHECK(sampleRow(30, 1337, 512) == 410);
  CHECK(sampleRow(31, 1337, 512) == 338);
  CHECK(sampleRow(0, 1337, 512) == 38);
  CHECK(sampleRow(4294967295ull, 1337, 512) == 155);
  CHECK(sampleRow(uint64_t(1) << 62, 1, 1000) == 796);
  CHECK(sampleRow(5, 7, 1) == 0);
  CHECK(sampleRow((uint64_t(1) << 40) + 3, 9, (uint64_t(1) << 40) + 1) == 436603684706ull);
  std::vector<uint64_t> three;
  for (uint64_t g = 0; g < 6; ++g)
    three.push_back(sampleRow(g, 3, 3));
  CHECK(three == std::vector<uint64_t>{2, 1, 0, 1, 2, 0});
}

TEST_CASE("data: every epoch visits each row once, in its own order", "[runtime][data]") {
  for (uint64_t n : {1, 2, 3, 4, 5, 7, 16, 17, 100, 513, 4097}) {
    std::vector<std::vector<uint64_t>> orders;
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<uint64_t> order, seen(n, 0);
      for (uint64_t p = 0; p < n; ++p) {
        uint64_t row = sampleRow(epoch * n + p, 42, n);
        REQUIRE(row < n);
        ++seen[row];
        order.push_back(row);
      }
      CHECK(seen == std::vector<uint64_t>(n, 1));
      orders.push_back(order);
    }
    if (n >= 16) { // 16! orders: equal ones would mean the epoch does not reach the key
      CHECK(orders[0] != orders[1]);
      CHECK(orders[1] != orders[2]);
    }
  }
  // Another seed, another order; consecutive samples not a fixed stride apart.
  std::vector<uint64_t> a, b;
  std::set<uint64_t> strides;
  for (uint64_t g = 0; g < 100; ++g) {
    a.push_back(sampleRow(g, 1, 100));
    b.push_back(sampleRow(g, 2, 100));
    if (g > 0)
      strides.insert((a[g] + 100 - a[g - 1]) % 100);
  }
  CHECK(a != b);
  CHECK(strides.size() > 10);
}

namespace {

// A safetensors file of float x [N, 3] (row r = 10r, 10r+1, 10r+2) and
// int64 y [N] (row r = 100r), plus any `extra` entries.
struct TensorFile {
  std::vector<float> x;
  std::vector<int64_t> y;
  std::vector<SafetensorsEntry> entries;

  explicit TensorFile(int64_t n) {
    for (int64_t r = 0; r < n; ++r) {
      for (int c = 0; c < 3; ++c)
        x.push_back(float(10 * r + c));
      y.push_back(100 * r);
    }
    entries.push_back({"x", "F32", {n, 3}, bytesOf(x)});
    entries.push_back({"y", "I64", {n}, bytesOf(y)});
  }
  template <typename T> static std::string_view bytesOf(const std::vector<T> &v) {
    return {reinterpret_cast<const char *>(v.data()), v.size() * sizeof(T)};
  }
  std::string write(const std::filesystem::path &dir, const std::string &name) const {
    std::string path = (dir / name).string();
    REQUIRE(writeSafetensors(path, entries).isOk());
    return path;
  }
};

const std::vector<TensorInputSpec> kMlpInputs = {{"x", "F32", {3}}, {"y", "I64", {}}};

template <typename T> T elementAt(const TensorField &f, size_t k) {
  T v;
  std::memcpy(&v, f.bytes.data() + k * sizeof(T), sizeof(T));
  return v;
}

} // namespace

TEST_CASE("data: tensor file batches", "[runtime][data]") {
  auto dir = std::filesystem::temp_directory_path() / "nnsc-tensor-data-test";
  std::filesystem::create_directories(dir);
  std::string path = TensorFile(10).write(dir, "train.safetensors");
  auto ds = TensorDataset::open(path, kMlpInputs, 5);
  REQUIRE(ds.isOk());
  CHECK(ds->numSamples() == 10);
  // B=2, accum=2, dp=2, dp_rank=1: step 0, micro 1 is g = 6, 7 -> rows 4, 0
  // (reference_train.py's row_of with seed 5 and N = 10)
  auto b = ds->trainBatch({2, 2, 2, 1}, 0, 1);
  REQUIRE(b.size() == 2);
  CHECK(b[0].dtype == "F32");
  CHECK(b[0].shape == std::vector<int64_t>{2, 3});
  CHECK(b[1].shape == std::vector<int64_t>{2});
  REQUIRE(b[0].bytes.size() == 6 * sizeof(float));
  CHECK(elementAt<float>(b[0], 0) == 40.0f);
  CHECK(elementAt<float>(b[0], 2) == 42.0f);
  CHECK(elementAt<float>(b[0], 3) == 0.0f);
  CHECK(elementAt<int64_t>(b[1], 0) == 400);
  CHECK(elementAt<int64_t>(b[1], 1) == 0);
  auto first = ds->trainBatch({2, 2, 2, 1}, 0, 0); // g = 2, 3 -> rows 6, 8
  CHECK(elementAt<int64_t>(first[1], 0) == 600);
  CHECK(elementAt<int64_t>(first[1], 1) == 800);
  auto v = ds->valBatch({2, 2, 2, 1}, 3); // step 3, accum 1: g = 14, 15 -> rows 6, 3
  CHECK(elementAt<int64_t>(v[1], 0) == 600);
  CHECK(elementAt<int64_t>(v[1], 1) == 300);
  CHECK(elementAt<float>(v[0], 4) == 31.0f);
  std::filesystem::remove_all(dir);
}

TEST_CASE("data: tensor files are checked against the program inputs", "[runtime][data]") {
  auto dir = std::filesystem::temp_directory_path() / "nnsc-tensor-check-test";
  std::filesystem::create_directories(dir);
  auto openError = [&](const TensorFile &f, std::vector<TensorInputSpec> inputs = kMlpInputs) {
    std::string path = f.write(dir, "d.safetensors");
    auto ds = TensorDataset::open(path, std::move(inputs), 0);
    REQUIRE(!ds.isOk());
    return ds.status().message();
  };
  std::string path = (dir / "d.safetensors").string();

  TensorFile missing(4);
  missing.entries[1].name = "label";
  CHECK(openError(missing) == path + ": error: no tensor 'y' for the program's input 'y' (I64 "
                                     "[N]); the file holds: label, x");

  TensorFile badType(4);
  badType.entries[1].dtype = "F64";
  CHECK(openError(badType) == path + ": error: tensor 'y' is F64 [4]; the program's input 'y' "
                                     "needs I64 [N] (N samples of shape [])");

  CHECK(openError(TensorFile(4), {{"x", "F32", {4}}}) ==
        path + ": error: tensor 'x' is F32 [4, 3]; the program's input 'x' needs F32 [N, 4] (N "
               "samples of shape [4])");

  TensorFile uneven(4);
  uneven.y.pop_back();
  uneven.entries[1] = {"y", "I64", {3}, TensorFile::bytesOf(uneven.y)};
  CHECK(openError(uneven) == path + ": error: tensor 'y' has 3 samples (first dim) but tensor "
                                    "'x' has 4; every input needs the same number");

  CHECK_THAT(openError(TensorFile(0)),
             Catch::Matchers::ContainsSubstring("tensor 'x' holds no samples"));
  CHECK_THAT(openError(TensorFile(4), {{"y", "I64", {1}}}),
             Catch::Matchers::ContainsSubstring(
                 "tensor 'y' is I64 [4]; the program's input 'y' needs I64 [N, 1]"));
  auto none = TensorDataset::open((dir / "none.safetensors").string(), kMlpInputs, 0);
  REQUIRE(!none.isOk());
  CHECK_THAT(none.status().message(),
             Catch::Matchers::ContainsSubstring("none.safetensors: error: cannot open"));
  std::filesystem::remove_all(dir);
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
