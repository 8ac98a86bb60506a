#pragma once
// The stages of nnsc-verify (private to the library).

#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/Trace/InputSpec.h"
#include "nnsc/Verify/Verify.h"

namespace nnsc::verify {

/// What the compile stage produced and the later stages read.
struct Job {
  std::string work;       ///< the work directory
  std::string program;    ///< WORK/program (rank{r}.py/.pb/.safetensors)
  std::string config;     ///< WORK/train.yaml
  std::string runDir;     ///< WORK/run
  std::string data;       ///< WORK/data/train.safetensors
  std::string modelClass; ///< the graph's name ("MLP")
  int ranks = 1, planNgpus = 1, dpCopies = 1;
  int64_t microBatch = 1;                    ///< B per rank: the first input's first dim
  std::vector<trace::InputSpecEntry> inputs; ///< forward order
  rt::OptimizerConfig optimizer;             ///< resolved defaults
  double weightsRtol = 0;
};

/// One step's mean loss of the reference.
struct ReferenceRun {
  std::vector<double> losses; ///< steps 1..S
  /// The final state_dict in its order: name, tensor, whether a buffer.
  struct Entry {
    std::string name;
    at::Tensor value;
    bool buffer = false;
    bool written = false; ///< a buffer training changed (running statistics)
  };
  std::vector<Entry> stateDict;
};

// Pipeline.cpp
/// trace → plan → codegen into job.work; fills job.
Status compileJob(const VerifyOptions &options, Job &job, std::ostream &log);
/// Multiplies every shard of `tensor` in the program's rank files by 1 + 1e-3.
Status injectFault(const Job &job, const std::string &tensor, std::ostream &log);
/// Writes job.config.
Status writeTrainerConfig(const VerifyOptions &options, const Job &job);
/// Runs nnsc-run on job.config with job.ranks local workers, output to WORK/run.log.
Status runTrainer(const VerifyOptions &options, const Job &job, std::ostream &log);

// Reference.cpp
/// Draws job.data: every input's rows uniformly in its range, seeded.
Status writeDataset(const VerifyOptions &options, const Job &job);
/// Trains the archive in this process on the batches nnsc-run fed.
Expected<ReferenceRun> trainReference(const VerifyOptions &options, const Job &job);

// Compare.cpp
/// Compares nnsc's metrics and merged checkpoint with the reference; writes
/// the report to `out`; returns whether everything is within tolerance.
Expected<bool> compareAndReport(const VerifyOptions &options, const Job &job,
                                const ReferenceRun &ref, std::ostream &out);

} // namespace nnsc::verify
