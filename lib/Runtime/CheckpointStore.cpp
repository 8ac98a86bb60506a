#include "nnsc/Runtime/CheckpointStore.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nnsc/Support/File.h"

namespace nnsc::rt {

namespace fs = std::filesystem;

namespace {

constexpr const char *kMarker = "COMPLETE";

Status fsyncDir(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return errorf("{}: error: cannot open directory: {}", dir, std::strerror(errno));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    return errorf("{}: error: fsync failed: {}", dir, std::strerror(errno));
  return Status::ok();
}

} // namespace

std::string checkpointDir(const std::string &runDir, int64_t step) {
  return (fs::path(runDir) / "checkpoints" / ("step-" + std::to_string(step))).string();
}

bool isCompleteCheckpoint(const std::string &dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kMarker, ec);
}

std::optional<int64_t> checkpointStep(const std::string &dir) {
  std::string name = fs::path(dir).filename().string();
  if (name.empty())
    name = fs::path(dir).parent_path().filename().string();
  if (name.rfind("step-", 0) != 0 || name.size() == 5)
    return std::nullopt;
  char *end = nullptr;
  long long v = std::strtoll(name.c_str() + 5, &end, 10);
  if (*end != '\0' || v < 0)
    return std::nullopt;
  return v;
}

std::vector<int64_t> listCheckpoints(const std::string &runDir, bool includeIncomplete) {
  std::vector<int64_t> steps;
  std::error_code ec;
  fs::path root = fs::path(runDir) / "checkpoints";
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    auto step = checkpointStep(it->path().string());
    if (step && it->is_directory() &&
        (includeIncomplete || isCompleteCheckpoint(it->path().string())))
      steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

bool isMergedCheckpointFile(const std::string &resume) {
  std::error_code ec;
  return resume != "auto" && resume != "never" && fs::is_regular_file(resume, ec);
}

Expected<std::optional<std::string>> findResumeCheckpoint(const std::string &runDir,
                                                          const std::string &resume) {
  if (resume == "never")
    return std::optional<std::string>();
  if (resume == "auto") {
    auto steps = listCheckpoints(runDir);
    if (steps.empty())
      return std::optional<std::string>();
    return std::optional<std::string>(checkpointDir(runDir, steps.back()));
  }
  if (!fs::is_directory(resume))
    return errorf("{}: error: checkpoint.resume names neither a checkpoint directory nor a merged "
                  "checkpoint file",
                  resume);
  std::error_code ec;
  fs::path root = fs::path(resume) / "checkpoints";
  if (fs::path(resume).filename() == "checkpoints" ||
      (fs::path(resume).filename().empty() &&
       fs::path(resume).parent_path().filename() == "checkpoints"))
    root = resume;
  if (!isCompleteCheckpoint(resume) && fs::is_directory(root, ec) && !checkpointStep(resume))
    return errorf("{}: error: checkpoint.resume names a run's directory, not one of its "
                  "checkpoints: name one ({}/step-N, {}/best), or set run_dir to the run's "
                  "directory and checkpoint.resume to auto (its newest)",
                  resume, root.string(), root.string());
  if (!isCompleteCheckpoint(resume))
    return errorf("{}: error: checkpoint is incomplete (no COMPLETE marker); a run was "
                  "interrupted while writing it",
                  resume);
  return std::optional<std::string>(resume);
}

Status markCheckpointComplete(const std::string &dir, int64_t step) {
  NNSC_RETURN_IF_ERROR(fsyncDir(dir));
  NNSC_RETURN_IF_ERROR(
      writeFileAtomic((fs::path(dir) / kMarker).string(), std::to_string(step) + "\n"));
  return fsyncDir(dir);
}

Status unmarkCheckpoint(const std::string &dir) {
  std::error_code ec;
  fs::remove(fs::path(dir) / kMarker, ec);
  if (ec)
    return errorf("{}: error: cannot remove the COMPLETE marker: {}", dir, ec.message());
  return Status::ok();
}

Status removeRankFilesBeyond(const std::string &dir, int worldSize) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.rfind("rank", 0) != 0)
      continue;
    char *digitsEnd = nullptr;
    long long rank = std::strtoll(name.c_str() + 4, &digitsEnd, 10);
    if (digitsEnd != name.c_str() + 4 && *digitsEnd == '.' && rank >= worldSize)
      stale.push_back(it->path());
  }
  if (ec)
    return errorf("{}: error: cannot list it: {}", dir, ec.message());
  for (const fs::path &path : stale) {
    fs::remove(path, ec);
    if (ec)
      return errorf("{}: error: cannot remove a file of an earlier, larger run: {}", path.string(),
                    ec.message());
  }
  return Status::ok();
}

std::string bestCheckpointDir(const std::string &runDir) {
  return (fs::path(runDir) / "checkpoints" / "best").string();
}

Status removeDirectory(const std::string &dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec)
    return errorf("{}: error: cannot remove: {}", dir, ec.message());
  return Status::ok();
}

Status replaceDirectory(const std::string &staged, const std::string &dir) {
  std::string old = dir + ".old";
  NNSC_RETURN_IF_ERROR(removeDirectory(old));
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    fs::rename(dir, old, ec);
    if (ec)
      return errorf("{}: error: cannot rename it to {}: {}", dir, old, ec.message());
  }
  fs::rename(staged, dir, ec);
  if (ec)
    return errorf("{}: error: cannot rename it to {}: {}", staged, dir, ec.message());
  NNSC_RETURN_IF_ERROR(fsyncDir(fs::path(dir).parent_path().string()));
  // Unmarked first, as pruning does: never a complete-looking copy with files missing.
  NNSC_RETURN_IF_ERROR(unmarkCheckpoint(old));
  return removeDirectory(old);
}

Status recoverDirectory(const std::string &dir) {
  std::error_code ec;
  if (fs::exists(dir, ec))
    return Status::ok();
  for (const std::string &copy : {dir + ".new", dir + ".old"}) // the newer first
    if (isCompleteCheckpoint(copy)) {
      fs::rename(copy, dir, ec);
      if (ec)
        return errorf("{}: error: cannot rename it to {}: {}", copy, dir, ec.message());
      return fsyncDir(fs::path(dir).parent_path().string());
    }
  return Status::ok();
}

Status pruneCheckpoints(const std::string &runDir, int64_t keepLast, int64_t newestStep) {
  auto complete = listCheckpoints(runDir);
  std::vector<int64_t> doomed;
  if (keepLast > 0 && int64_t(complete.size()) > keepLast)
    doomed.assign(complete.begin(), complete.end() - keepLast);
  for (int64_t step : listCheckpoints(runDir, true))
    if (step < newestStep && !isCompleteCheckpoint(checkpointDir(runDir, step)))
      doomed.push_back(step);
  for (int64_t step : doomed) {
    if (step == newestStep) // a run resumed from an older one: newer ones do not oust it
      continue;
    std::error_code ec;
    std::string dir = checkpointDir(runDir, step);
    // Unmark first: a crash halfway through leaves an incomplete directory,
    // never a complete-looking one with files missing.
    NNSC_RETURN_IF_ERROR(unmarkCheckpoint(dir));
    fs::remove_all(dir, ec);
    if (ec)
      return errorf("{}: error: cannot remove old checkpoint: {}", dir, ec.message());
  }
  return Status::ok();
}

std::optional<int64_t> completeCheckpointStep(const std::string &dir) {
  auto text = readFile((fs::path(dir) / kMarker).string());
  if (!text)
    return std::nullopt;
  char *end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 10);
  if (end == text->c_str() || (*end != '\0' && *end != '\n') || v < 0)
    return std::nullopt;
  return v;
}

Expected<std::string> setAsideCheckpoints(const std::string &runDir,
                                          const std::vector<std::string> &names) {
  fs::path root = fs::path(runDir) / "checkpoints";
  std::error_code ec;
  fs::path target;
  for (int k = 1;; ++k) {
    target = root / ("superseded-" + std::to_string(k));
    if (!fs::exists(target, ec))
      break;
  }
  NNSC_RETURN_IF_ERROR(makeDirs(target.string()));
  std::vector<std::string> moved;
  for (const std::string &name : names) {
    fs::path from = root / name;
    if (!fs::exists(from, ec))
      continue;
    fs::rename(from, target / name, ec);
    if (ec)
      return errorf(
          "{}: error: cannot move it to {}: {}{}", from.string(), target.string(), ec.message(),
          moved.empty() ? std::string()
                        : fmt::format(" (moved there before it: {})", fmt::join(moved, ", ")));
    moved.push_back(name);
  }
  NNSC_RETURN_IF_ERROR(fsyncDir(target.string()));
  NNSC_RETURN_IF_ERROR(fsyncDir(root.string()));
  return target.string();
}

} // namespace nnsc::rt
