#pragma once
// Factories of the concrete backends; createBackend (Comm.h) picks one.

#include "nnsc/Runtime/Comm.h"

namespace nnsc::rt {

#ifdef NNSC_HAVE_GLOO
/// A c10d::ProcessGroupGloo over `store` (under `prefix`) for CPU tensors.
Expected<std::shared_ptr<CommBackend>>
createGlooBackend(const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
                  const std::string &prefix, const CommOptions &options, const LaunchEnv &env);
#endif

#ifdef NNSC_HAVE_NCCL
/// An NCCL communicator for CUDA tensors; rank 0 of the group publishes the
/// unique id in `store` under `prefix`.
Expected<std::shared_ptr<CommBackend>>
createNcclBackend(const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
                  const std::string &prefix, const CommOptions &options, const LaunchEnv &env);
#endif

/// Adds a hint to a transport error: "timed out ..." or "connection closed
/// ..." mean a peer died or never reached the same operation.
std::string explainCommFailure(const std::string &raw, std::chrono::milliseconds timeout);

/// The message of a caught exception, without LibTorch's C++ backtrace.
std::string exceptionMessage(const std::exception &e);

} // namespace nnsc::rt
