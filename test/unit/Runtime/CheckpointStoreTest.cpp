// Checkpoint directories: COMPLETE markers, resume discovery, keep-last.
#include "../CatchCompat.h"

#include <filesystem>

#include "nnsc/Runtime/CheckpointStore.h"
#include "nnsc/Support/File.h"

using namespace nnsc;
using namespace nnsc::rt;
namespace fs = std::filesystem;

namespace {

std::string freshRunDir(const char *name) {
  auto dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void makeCheckpoint(const std::string &run, int64_t step, bool complete) {
  std::string dir = checkpointDir(run, step);
  REQUIRE(makeDirs(dir).isOk());
  REQUIRE(writeFileAtomic(dir + "/rank0.json", "{}").isOk());
  if (complete)
    REQUIRE(markCheckpointComplete(dir, step).isOk());
}

} // namespace

TEST_CASE("checkpoint store: layout and step names", "[runtime][checkpoint]") {
  CHECK(checkpointDir("runs/a", 40) == "runs/a/checkpoints/step-40");
  CHECK(checkpointStep("runs/a/checkpoints/step-40") == 40);
  CHECK(checkpointStep("runs/a/checkpoints/step-40/") == 40);
  CHECK(!checkpointStep("runs/a/checkpoints/latest"));
}

TEST_CASE("checkpoint store: resume picks the newest complete one", "[runtime][checkpoint]") {
  std::string run = freshRunDir("nnsc-ckpt-resume");
  auto none = findResumeCheckpoint(run, "auto");
  REQUIRE(none.isOk());
  CHECK(!none->has_value());
  makeCheckpoint(run, 10, true);
  makeCheckpoint(run, 20, true);
  makeCheckpoint(run, 30, false); // interrupted while writing
  CHECK(listCheckpoints(run) == std::vector<int64_t>{10, 20});
  CHECK(listCheckpoints(run, true) == std::vector<int64_t>{10, 20, 30});
  auto found = findResumeCheckpoint(run, "auto");
  REQUIRE(found.isOk());
  CHECK(**found == checkpointDir(run, 20));
  auto never = findResumeCheckpoint(run, "never");
  REQUIRE(never.isOk());
  CHECK(!never->has_value());
  auto explicitDir = findResumeCheckpoint(run, checkpointDir(run, 10));
  REQUIRE(explicitDir.isOk());
  CHECK(**explicitDir == checkpointDir(run, 10));
  auto partial = findResumeCheckpoint(run, checkpointDir(run, 30));
  REQUIRE(!partial.isOk());
  CHECK_THAT(partial.status().message(),
             Catch::Matchers::ContainsSubstring("incomplete (no COMPLETE marker)"));
  fs::remove_all(run);
}

TEST_CASE("checkpoint store: keep_last prunes old and interrupted ones", "[runtime][checkpoint]") {
  std::string run = freshRunDir("nnsc-ckpt-prune");
  for (int64_t s : {10, 20, 30})
    makeCheckpoint(run, s, true);
  makeCheckpoint(run, 35, false);
  makeCheckpoint(run, 40, true);
  REQUIRE(pruneCheckpoints(run, 2, 40).isOk());
  CHECK(listCheckpoints(run, true) == std::vector<int64_t>{30, 40});
  REQUIRE(pruneCheckpoints(run, 0, 40).isOk()); // 0 keeps all
  CHECK(listCheckpoints(run) == std::vector<int64_t>{30, 40});
  makeCheckpoint(run, 50, false); // newer than the newest complete: left alone
  REQUIRE(pruneCheckpoints(run, 1, 40).isOk());
  CHECK(listCheckpoints(run, true) == std::vector<int64_t>{40, 50});
  // A run resumed from an older checkpoint (resume: a path) writes one below the newest:
  // pruning never takes the one just written.
  makeCheckpoint(run, 60, true); // the earlier run's newest
  makeCheckpoint(run, 45, true);
  REQUIRE(pruneCheckpoints(run, 1, 45).isOk());
  CHECK(listCheckpoints(run, true) == std::vector<int64_t>{45, 50, 60});
  fs::remove_all(run);
}

// checkpoint.save_best's directory: replaced through .new and .old, put back by the next start
// where a run stopped between the renames.
TEST_CASE("checkpoint store: the best checkpoint's replacement and recovery",
          "[runtime][checkpoint]") {
  std::string run = freshRunDir("nnsc-ckpt-best");
  std::string best = bestCheckpointDir(run);
  CHECK(best == run + "/checkpoints/best");
  auto stage = [&](int64_t step) {
    REQUIRE(makeDirs(best + ".new").isOk());
    REQUIRE(writeFileAtomic(best + ".new/rank0.json", std::to_string(step)).isOk());
    REQUIRE(markCheckpointComplete(best + ".new", step).isOk());
  };
  stage(8);
  REQUIRE(replaceDirectory(best + ".new", best).isOk());
  stage(12);
  REQUIRE(replaceDirectory(best + ".new", best).isOk());
  CHECK(*readFile(best + "/rank0.json") == "12");
  CHECK(!fs::exists(best + ".new"));
  CHECK(!fs::exists(best + ".old"));
  CHECK(listCheckpoints(run, true).empty()); // not a step: resume auto and pruning skip it
  // Stopped after best -> best.old: the complete best.new (newer) is put in place.
  stage(16);
  fs::rename(best, best + ".old");
  REQUIRE(recoverDirectory(best).isOk());
  CHECK(*readFile(best + "/rank0.json") == "16");
  // Stopped before best.new was complete: best.old is put back.
  fs::remove_all(best + ".old");
  fs::rename(best, best + ".old");
  REQUIRE(makeDirs(best + ".new").isOk());
  REQUIRE(recoverDirectory(best).isOk());
  CHECK(*readFile(best + "/rank0.json") == "16");
  REQUIRE(recoverDirectory(best).isOk()); // a best in place: nothing to do
  CHECK(*readFile(best + "/rank0.json") == "16");
  fs::remove_all(run);
}

TEST_CASE("checkpoint store: unmark before rewriting", "[runtime][checkpoint]") {
  std::string run = freshRunDir("nnsc-ckpt-unmark");
  makeCheckpoint(run, 5, true);
  REQUIRE(isCompleteCheckpoint(checkpointDir(run, 5)));
  REQUIRE(unmarkCheckpoint(checkpointDir(run, 5)).isOk());
  CHECK(!isCompleteCheckpoint(checkpointDir(run, 5)));
  fs::remove_all(run);
}

TEST_CASE("checkpoint store: another history set aside", "[runtime][checkpoint]") {
  std::string run = freshRunDir("nnsc-ckpt-aside");
  for (int64_t step : {10, 20, 30})
    makeCheckpoint(run, step, true);
  makeCheckpoint(run, 40, false);
  CHECK(completeCheckpointStep(checkpointDir(run, 20)) == 20);
  CHECK(!completeCheckpointStep(checkpointDir(run, 40))); // incomplete
  REQUIRE(writeFileAtomic(checkpointDir(run, 40) + "/COMPLETE", "soon\n").isOk());
  CHECK(!completeCheckpointStep(checkpointDir(run, 40))); // a marker without a step
  REQUIRE(unmarkCheckpoint(checkpointDir(run, 40)).isOk());

  auto first = setAsideCheckpoints(run, {"step-20", "step-30", "best"}); // no best: skipped
  REQUIRE(first);
  CHECK(*first == run + "/checkpoints/superseded-1");
  CHECK(listCheckpoints(run) == std::vector<int64_t>{10});
  CHECK(listCheckpoints(run, true) == std::vector<int64_t>{10, 40});
  CHECK(completeCheckpointStep(*first + "/step-30") == 30); // moved whole, still complete
  CHECK(findResumeCheckpoint(run, "auto")->value() == checkpointDir(run, 10));

  auto second = setAsideCheckpoints(run, {"step-10"}); // the first number not taken
  REQUIRE(second);
  CHECK(*second == run + "/checkpoints/superseded-2");
  CHECK(listCheckpoints(run).empty());
  CHECK(fs::exists(*first + "/step-20/rank0.json"));
  fs::remove_all(run);
}
