#pragma once
/// What `nnsc-run CONFIG.yaml [--key.path=value ...] [--nproc-per-node N]`
/// does: with --nproc-per-node it checks the config once and supervises N
/// local workers (Launcher.h), each a copy of this command without the flag;
/// without it, it is one worker of a job described by the launcher's
/// environment (torchrun, Open MPI, Slurm or none: a single process).

#include <iosfwd>
#include <string>
#include <vector>

#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

struct RunOptions {
  std::string config;                 ///< the YAML trainer config
  std::vector<std::string> overrides; ///< "--train.steps=20", ...
  int nprocPerNode = 0;               ///< 0 = be a worker
  bool printConfig = false;           ///< print the resolved config and stop
  std::vector<std::string> argv;      ///< the command line, for the workers
};

/// Whether idle OpenMP threads should wait passively (config omp_wait
/// passive) and the environment names no wait policy of its own
/// (OMP_WAIT_POLICY, GOMP_SPINCOUNT): then OMP_WAIT_POLICY=PASSIVE is set in
/// this process's environment. libgomp reads it when it loads, before main,
/// so the workers must start with it: the launcher's inherit it, and a worker
/// started otherwise (torchrun) runs its own command again with it.
bool setPassiveOmpWait(const TrainerConfig &config);

/// Runs the command; returns the process exit code (0 ok, 1 bad input,
/// 2 internal error or a failed worker).
int runCommand(const RunOptions &options, std::ostream &out, std::ostream &err);

/// `args` (without argv[0]) minus each of `flags` with its value, in either
/// form ("--nproc-per-node N" / "--nproc-per-node=N"): a worker's command line.
std::vector<std::string> withoutLauncherFlags(const std::vector<std::string> &args,
                                              const std::vector<std::string> &flags = {
                                                  "--nproc-per-node"});

} // namespace nnsc::rt
