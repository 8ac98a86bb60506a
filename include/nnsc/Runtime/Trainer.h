#pragma once
/// One worker of a training job (docs/trainer-config.md): reads its rank
/// manifest rank{r}.pb, loads its shards from rank{r}.safetensors, compiles
/// rank{r}.py, connects to the other ranks, resumes from the newest complete
/// checkpoint (checkpoint.resume), and runs train.steps optimizer steps.
/// Per micro-batch the program's inputs are fed from the dataset — the first
/// ProgramInput gets x (token ids), the second y (next-token targets) — and
/// output[loss_output] / grad_accumulation is backpropagated; then the
/// reducers average gradients across data-parallel copies, the global norm
/// is clipped, the optimizer steps and the schedule moves on. Rank 0 prints
/// progress and appends metrics; every rank writes its part of checkpoints.

#include <iosfwd>

#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// Trains to the end. `out` gets rank 0's progress lines. LibTorch
/// exceptions are caught and returned as internal errors.
Status runTrainer(const TrainerConfig &config, const LaunchEnv &env, std::ostream &out);

} // namespace nnsc::rt
