#pragma once
/// nnsc-verify as a library: before a long run, train a few steps of the
/// parallel programs (nnsc-run on CPU processes over Gloo) and of the
/// original archive in this process (LibTorch, no Python) on the same
/// batches, and compare every step's loss and every final parameter and
/// buffer against a tolerance.
///
/// The pipeline: trace (with its self-check) → plan (a policy or a plan
/// file) → codegen → a tensors dataset drawn from the input spec → a trainer
/// config → `nnsc-run --nproc-per-node N` (the binary beside this one) →
/// merge the final checkpoint → the reference → the report.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "nnsc/Support/Status.h"

namespace nnsc::verify {

struct VerifyOptions {
  std::string modelPath;  ///< TorchScript archive
  std::string inputsPath; ///< sample-input spec (nnsc-trace's)
  std::string policy = "dp";
  std::optional<int> planNgpus; ///< devices per model copy (tp, data, file); unset = policy default
  std::string planFile;         ///< policy file: the plan YAML
  int ranks = 2;                ///< processes nnsc-run starts
  int steps = 3;
  int accumulation = 1;
  std::string optimizer = "sgd"; ///< sgd | adam | adamw
  std::optional<double> lr;      ///< unset: 0.05 for sgd, 3e-3 for adam(w)
  double momentum = 0.9;         ///< SGD
  double weightDecay = -1;       ///< < 0: 0 for sgd, 0.1 for adam(w)
  double gradClip = 0;
  double rtol = 1e-5;                ///< losses (and weights under SGD)
  std::optional<double> weightsRtol; ///< unset: rtol (sgd), 10 x rtol (adam, adamw)
  int64_t samples = 64;              ///< rows of the generated dataset
  int64_t seed = 1234;               ///< data rows and values; >= 0 (nnsc-run's 'seed')
  std::string workDir;               ///< empty: a fresh temporary directory
  bool keep = false;                 ///< keep a temporary work directory on success
  std::string trainerBinary;         ///< empty: nnsc-run beside this executable
  std::string faultTensor;           ///< testing: perturb this tensor's shards before training
};

struct VerifyResult {
  bool passed = false;
  std::string workDir; ///< where the artifacts are (empty if removed)
};

/// Limits of the flags, checked before anything runs: every rank is a local
/// CPU process, every sample row is held in memory at once.
constexpr int kMaxRanks = 256;
constexpr int64_t kMaxSamples = 2147483647;

/// Runs the check; the report goes to `out`, progress and errors' details
/// to `log`. An error Status is bad input (a file, a value, a failed
/// nnsc-run) or an internal failure; a mismatch is a result, not an error.
Expected<VerifyResult> runVerify(const VerifyOptions &options, std::ostream &out,
                                 std::ostream &log);

} // namespace nnsc::verify
