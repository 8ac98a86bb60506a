#include "../CatchCompat.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "nnsc/Support/File.h"
#include "nnsc/Support/Safetensors.h"

using namespace nnsc;

namespace {
std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() / ("nnsc-unit-" + name)).string();
}
} // namespace

TEST_CASE("safetensors round trip keeps names, shapes, dtypes, bytes and metadata") {
  float a[6] = {1, 2, 3, 4, 5, 6};
  int64_t b[2] = {-7, 1LL << 40};
  std::vector<SafetensorsEntry> entries = {
      {"w", "F32", {2, 3}, std::string_view(reinterpret_cast<char *>(a), sizeof a)},
      {"idx", "I64", {2}, std::string_view(reinterpret_cast<char *>(b), sizeof b)}};
  std::string path = tempPath("rt.safetensors");
  REQUIRE(writeSafetensors(path, entries, {{"k", "v"}}).isOk());
  auto f = SafetensorsFile::open(path);
  REQUIRE(f.isOk());
  REQUIRE((*f)->entries().size() == 2);
  CHECK((*f)->entries()[0].name == "idx"); // sorted by name
  const SafetensorsEntry *w = (*f)->find("w");
  REQUIRE(w != nullptr);
  CHECK(w->shape == std::vector<int64_t>{2, 3});
  CHECK(w->dtype == "F32");
  CHECK(std::memcmp(w->bytes.data(), a, sizeof a) == 0);
  CHECK((*f)->metadata().at("k") == "v");
  CHECK((*f)->find("nope") == nullptr);
}

TEST_CASE("safetensors rejects a wrong byte count on write") {
  float a[2] = {1, 2};
  std::vector<SafetensorsEntry> entries = {
      {"w", "F32", {3}, std::string_view(reinterpret_cast<char *>(a), sizeof a)}};
  Status st = writeSafetensors(tempPath("bad.safetensors"), entries);
  CHECK(st.kind() == ErrorKind::Internal);
  CHECK(st.message().find("'w' has 8 bytes, expected 12") != std::string::npos);
}

TEST_CASE("safetensors reports truncated and foreign files by name") {
  float a[4] = {1, 2, 3, 4};
  std::string path = tempPath("trunc.safetensors");
  REQUIRE(
      writeSafetensors(path, {{"w", "F32", {4}, std::string_view((char *)a, sizeof a)}}).isOk());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  auto f = SafetensorsFile::open(path);
  REQUIRE_FALSE(f.isOk());
  CHECK(f.status().message() ==
        path + ": error: entry 'w' points past the end of the file (truncated?)");

  std::string junk = tempPath("junk.safetensors");
  REQUIRE(writeFileAtomic(junk, "hello").isOk());
  auto g = SafetensorsFile::open(junk);
  REQUIRE_FALSE(g.isOk());
  CHECK(g.status().message() == junk + ": error: not a safetensors file (only 5 bytes)");

  auto missing = SafetensorsFile::open(tempPath("does-not-exist"));
  CHECK(missing.status().message().find("cannot open file") != std::string::npos);
}

TEST_CASE("writeFileAtomic replaces the old content and leaves no temporary") {
  std::string path = tempPath("atomic.txt");
  REQUIRE(writeFileAtomic(path, "first").isOk());
  REQUIRE(writeFileAtomic(path, "second").isOk());
  CHECK(*readFile(path) == "second");
  int files = 0;
  for (const auto &e :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    files += e.path().filename().string().rfind("nnsc-unit-atomic.txt.tmp", 0) == 0;
  CHECK(files == 0);
  Status st = writeFileAtomic("/nonexistent-dir/x", "y");
  CHECK(st.message().find("/nonexistent-dir/x.tmp") != std::string::npos);
}

// Found by the hostile corpus: an entry whose data_offsets overlap another's
// was read (it held part of its neighbour's bytes).
TEST_CASE("safetensors refuses entries whose bytes overlap") {
  auto file = [](const std::string &offsetsOfB) {
    std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":)" +
                         offsetsOfB + "}}";
    std::string bytes(8, '\0');
    uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    return bytes + header + std::string(16, '\1');
  };
  REQUIRE(SafetensorsFile::fromBytes(file("[8,16]"), "ok.safetensors"));
  auto bad = SafetensorsFile::fromBytes(file("[4,12]"), "w.safetensors");
  REQUIRE_FALSE(bad);
  CHECK(bad.status().message() ==
        "w.safetensors: error: entry 'b' data_offsets [4, 12] overlap entry 'a' [0, 8]");
}

TEST_CASE("an output transaction replaces all its files or none") {
  namespace fs = std::filesystem;
  fs::path dir = tempPath("transaction");
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string a = (dir / "a").string(), b = (dir / "b").string(), stale = (dir / "old").string();
  REQUIRE(writeFileAtomic(a, "old a").isOk());
  REQUIRE(writeFileAtomic(stale, "stale").isOk());
  fs::create_directory(b); // blocks the second output
  {
    OutputTransaction outputs;
    REQUIRE(writeFileAtomic(a, "new a").isOk());
    CHECK(readFile(a).take() == "old a"); // staged, not yet in place
    auto st = writeFileAtomic(b, "new b");
    REQUIRE_FALSE(st);
    CHECK(st.message() == b + ": error: cannot write the output: it is a directory");
  } // destroyed uncommitted: the temporary of a is gone, a is as it was
  CHECK(readFile(a).take() == "old a");
  size_t files = 0;
  for (const auto &entry : fs::directory_iterator(dir))
    files += entry.is_regular_file();
  CHECK(files == 2); // a and old: no temporary left
  fs::remove(b);
  {
    OutputTransaction outputs;
    REQUIRE(writeFileAtomic(a, "new a").isOk());
    REQUIRE(writeFileAtomic(b, "new b").isOk());
    auto twice = writeFileAtomic((dir / "." / "a").string(), "again");
    REQUIRE_FALSE(twice);
    CHECK_THAT(twice.message(), Catch::Matchers::ContainsSubstring(
                                    "two outputs of this run name the same file"));
    outputs.removeOnCommit(stale);
    REQUIRE(outputs.commit().isOk());
  }
  CHECK(readFile(a).take() == "new a");
  CHECK(readFile(b).take() == "new b");
  CHECK_FALSE(fs::exists(stale));
  fs::remove_all(dir);
}
