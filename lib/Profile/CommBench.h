#pragma once
// The worker of nnsc-profile-comm (CommBench.cpp, LibTorch).

#include <iosfwd>

#include "nnsc/Profile/ProfileComm.h"
#include "nnsc/Runtime/LaunchEnv.h"

namespace nnsc::profile {

/// Joins the job described by `env`, times every (collective, group size,
/// message size) of `plan`, and on rank 0 writes the table to plan.out and a
/// summary to `out`. Every rank of the job must call it with the same plan.
Status runCommWorker(const CommPlan &plan, const rt::LaunchEnv &env, std::ostream &out);

} // namespace nnsc::profile
