#pragma once
/// Binding each local worker to a share of the node's CPUs.
///
/// Two CPU workers on two cores, unbound, let the kernel put a thread of one
/// worker on the core where the other computes: Gloo's threads of a worker
/// waiting in a collective queued behind the other worker's matmuls: a Llama
/// Megatron step on this 2-core VM spent 31.4 ms in its all-reduces instead
/// of 12.0 when each worker had a core of its own, 128.2 -> 108.8 ms a step
/// (bench/cpu_workers.py, Gloo's workers under SCHED_BATCH in both). Launchers for CPU training bind the same way (Intel's
/// PyTorch launcher, `mpirun --bind-to core`, `srun --cpu-bind=cores`).
#include <string>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// Worker `localRank`'s share of `allowed` among `localWorldSize` workers:
/// the contiguous slice [r*n/w, (r+1)*n/w) of the CPUs in their order. Empty
/// when there are fewer CPUs than workers (the workers then share them all).
std::vector<int> cpuShare(const std::vector<int> &allowed, int localRank, int localWorldSize);

/// The CPUs this process may run on (sched_getaffinity: a cpuset, taskset or
/// an outer launcher's binding is respected), ascending. Empty where unknown.
std::vector<int> allowedCpus();

/// Binds every thread of this process, and so every thread they start later,
/// to `cpus`. An error names the CPUs and the reason; threads that were bound
/// before the failure stay bound.
Status bindProcessToCpus(const std::vector<int> &cpus);

/// Binds local worker `localRank` of `localWorldSize` to its cpuShare of
/// allowedCpus(); nothing to do (ok) for a single worker or too few CPUs.
/// nnsc-run (`cpu_bind: cores`), nnsc-profile-comm and nnsc-profile-device
/// bind their CPU workers alike, so that the tables see training's placement.
Status bindLocalWorker(int localRank, int localWorldSize);

/// bindLocalWorker, its failure as the warning line a tool prints: binding
/// is a speed-up, never a reason to stop. "" when bound or nothing to do.
std::string bindLocalWorkerOrWarn(const std::string &tool, int rank, int localRank,
                                  int localWorldSize);

/// "0-3,8" for {0, 1, 2, 3, 8}.
std::string cpuListText(const std::vector<int> &cpus);

} // namespace nnsc::rt
