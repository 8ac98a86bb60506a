#pragma once
/// The checkpoint directory layout of a run (no LibTorch):
///
///   RUN_DIR/checkpoints/step-<N>/rank{r}.safetensors   tensors of rank r
///   RUN_DIR/checkpoints/step-<N>/rank{r}.json          its step, data position, ...
///   RUN_DIR/checkpoints/step-<N>/COMPLETE              written last, by rank 0
///
/// A directory without COMPLETE is a checkpoint a crash interrupted; it is
/// never resumed from and is removed by the next prune.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// RUN_DIR/checkpoints/step-<step>.
std::string checkpointDir(const std::string &runDir, int64_t step);

/// True when `dir` holds the COMPLETE marker.
bool isCompleteCheckpoint(const std::string &dir);

/// Steps of the checkpoints under RUN_DIR/checkpoints, ascending; complete
/// ones only unless `includeIncomplete`.
std::vector<int64_t> listCheckpoints(const std::string &runDir, bool includeIncomplete = false);

/// The checkpoint to resume from: `resume` is "auto" (newest complete one,
/// or none), "never" (none) or a checkpoint directory (must be complete).
Expected<std::optional<std::string>> findResumeCheckpoint(const std::string &runDir,
                                                          const std::string &resume);

/// True when checkpoint.resume names a regular file: a merged checkpoint
/// (nnsc-merge-ckpt's output) rather than a checkpoint directory.
bool isMergedCheckpointFile(const std::string &resume);

/// Writes the COMPLETE marker (atomically, then fsyncs the directory).
Status markCheckpointComplete(const std::string &dir, int64_t step);

/// Removes `dir`'s COMPLETE marker, if any, before the directory is rewritten.
Status unmarkCheckpoint(const std::string &dir);

/// Removes from `dir` the files of ranks `worldSize` and above (rank<N>.json,
/// rank<N>.safetensors and their temporaries): what an interrupted checkpoint of a larger world
/// left there, which this world's checkpoint of the same name would otherwise carry along (and
/// nnsc-merge-ckpt refuse).
Status removeRankFilesBeyond(const std::string &dir, int worldSize);

/// Deletes complete checkpoints older than the newest `keepLast` (0 keeps
/// all) and incomplete ones older than `newestStep`. Call only after the
/// newest checkpoint is complete.
/// RUN_DIR/checkpoints/best (checkpoint.save_best): a checkpoint like the others, which
/// resume auto and pruning leave alone.
std::string bestCheckpointDir(const std::string &runDir);

/// Removes `dir` and everything in it, if it exists.
Status removeDirectory(const std::string &dir);

/// Moves the complete checkpoint `staged` to `dir`, replacing the one there: `dir` is first
/// renamed to `dir`.old (removed last), so at every moment one of the three names holds a
/// complete checkpoint.
Status replaceDirectory(const std::string &staged, const std::string &dir);

/// After a run stopped inside replaceDirectory: where `dir` is missing, the complete one of
/// `dir`.new (the newer) or `dir`.old takes its place.
Status recoverDirectory(const std::string &dir);

Status pruneCheckpoints(const std::string &runDir, int64_t keepLast, int64_t newestStep);

/// The step a complete checkpoint directory holds (its COMPLETE marker's content); none for an
/// incomplete one or a marker that does not hold a step.
std::optional<int64_t> completeCheckpointStep(const std::string &dir);

/// Moves the entries `names` of RUN_DIR/checkpoints (step-<N>, best) into
/// RUN_DIR/checkpoints/superseded-<K>, K the first number not taken, and returns that
/// directory: checkpoints of another run's history, out of the way of resume auto, pruning and
/// nnsc-merge-ckpt RUN_DIR, and not lost. Names that do not exist are skipped.
Expected<std::string> setAsideCheckpoints(const std::string &runDir,
                                          const std::vector<std::string> &names);

/// Reads the step a checkpoint directory's name ("step-<N>") ends in.
std::optional<int64_t> checkpointStep(const std::string &dir);

} // namespace nnsc::rt
