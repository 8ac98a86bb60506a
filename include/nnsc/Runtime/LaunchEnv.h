#pragma once
/// Where this process sits in a distributed job, read from the launcher's
/// environment: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE), Open MPI
/// (OMPI_COMM_WORLD_*) or Slurm (SLURM_PROCID, SLURM_NTASKS, ...).

#include <functional>
#include <optional>
#include <string>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// The default rendezvous port when the launcher does not name one
/// (torchrun's default too).
constexpr int kDefaultMasterPort = 29500;

/// One process's place in the job. All ranks are global unless named local.
struct LaunchEnv {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;      ///< index among the processes on this node
  int localWorldSize = 1; ///< processes on this node
  std::string masterAddr = "127.0.0.1";
  /// Port of the rendezvous store; 0 lets rank 0 pick a free one (only
  /// useful when the job is a single process).
  int masterPort = 0;
  /// True under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True):
  /// the launcher hosts the store and every rank, rank 0 included, connects
  /// as a client under the key prefix "/worker/attempt_<restartCount>".
  bool useAgentStore = false;
  int restartCount = 0; ///< TORCHELASTIC_RESTART_COUNT
  /// Which launcher the values came from: "torchrun", "openmpi", "slurm" or
  /// "single process" (no launcher variables at all).
  std::string source = "single process";
};

/// Looks up one environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string &name)>;

/// Reads the real process environment (getenv).
EnvLookup processEnv();

/// Reads the launcher's variables through `env`. torchrun's variables win
/// over Open MPI's, which win over Slurm's; with none of them the result is a
/// single-process job. A missing, non-numeric or inconsistent value is an
/// error naming the variable, e.g. "RANK=4 is out of range for WORLD_SIZE=4".
Expected<LaunchEnv> readLaunchEnv(const EnvLookup &env = processEnv());

/// The first host of a Slurm node list: "gpu[003-005,9],cpu1" -> "gpu003".
std::string firstSlurmHost(const std::string &nodeList);

} // namespace nnsc::rt
