#pragma once
/// Whole-file reads and crash-safe writes.

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc {

/// Reads the file at `path`; the error names the path and the OS reason (a
/// directory is refused as such, not read as an empty file).
Expected<std::string> readFile(const std::string &path);

/// Writes `bytes` to `path` atomically: a temporary name in the same
/// directory, flushed with fsync, then renamed over `path`. A crash leaves
/// either the old file or the new one, never half of one.
Status writeFileAtomic(const std::string &path, std::string_view bytes);

/// Like writeFileAtomic, but the content comes from `writer`, which appends
/// pieces through the callback it is given (for files too big to assemble).
Status writeFileAtomicStreamed(
    const std::string &path,
    const std::function<Status(const std::function<Status(std::string_view)> &)> &writer);

/// The outputs of one run, replaced all together or not at all. While one is
/// open on a thread, writeFileAtomic and writeFileAtomicStreamed on that
/// thread leave each file whole under its temporary name; commit() renames
/// them over their paths (after checking that none is blocked, by a directory
/// say) and then removes the files named with removeOnCommit. Destroyed
/// uncommitted (an error return), it removes its temporaries: every earlier
/// file stays as it was. A path written twice in one transaction is an error
/// (two outputs given the same file). Opened inside another, it hands its
/// files to the outer one on commit.
class OutputTransaction {
public:
  OutputTransaction();
  ~OutputTransaction();
  OutputTransaction(const OutputTransaction &) = delete;
  OutputTransaction &operator=(const OutputTransaction &) = delete;

  /// `path` is removed once the staged files are in place (a stale output of
  /// an earlier run that the new outputs must not be paired with).
  void removeOnCommit(const std::string &path);
  Status commit();

  /// Stages `tmp` to replace `path`; an error if `path` was staged already.
  Status stage(const std::string &tmp, const std::string &path);
  /// This thread's open transaction, or null.
  static OutputTransaction *current();

private:
  struct Staged {
    std::string tmp, path;
  };
  std::vector<Staged> staged_;
  std::set<std::string> keys_; ///< the staged paths, canonical
  std::vector<std::string> removals_;
  OutputTransaction *outer_;
  bool done_ = false;
};

/// Creates `dir` and its parents if missing.
Status makeDirs(const std::string &dir);

} // namespace nnsc
