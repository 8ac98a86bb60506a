#include "nnsc/Runtime/RunCommand.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ostream>

#include <unistd.h>

#include <fmt/format.h>

#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Runtime/Launcher.h"
#include "nnsc/Runtime/Trainer.h"
#include "nnsc/Runtime/TrainerConfig.h"

namespace nnsc::rt {

namespace {

int fail(const Status &st, std::ostream &err) {
  err << st.message() << std::endl;
  return static_cast<int>(st.kind());
}

// nnsc-run's launcher starts one machine's workers. Run as one task of another launcher's job
// (torchrun, mpirun, srun with more than one task), every task would start a job of its own,
// all of them in the same run_dir.
Status checkNotOneTaskOfMany() {
  for (const char *var :
       {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char *value = std::getenv(var);
    if (value && std::atoll(value) > 1)
      return errorf("command line: error: --nproc-per-node starts the workers of one machine, "
                    "and this process is one of {} tasks of another launcher ({}={}): each "
                    "would start a job of its own in the same run_dir. Drop --nproc-per-node "
                    "and let that launcher start one task per worker",
                    value, var, value);
  }
  return Status::ok();
}

// Replaces this process with its own command again (its environment as set
// now); returns only when that fails, after a warning.
void runAgain(const std::vector<std::string> &args, std::ostream &out, std::ostream &err) {
  std::string self = selfExecutable();
  std::vector<std::string> all{self};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char *> pointers;
  for (std::string &a : all)
    pointers.push_back(a.data());
  pointers.push_back(nullptr);
  out.flush();
  err.flush();
  ::execv(self.c_str(), pointers.data());
  err << fmt::format("nnsc-run: warning: cannot start again with OMP_WAIT_POLICY=PASSIVE ({}); "
                     "idle OpenMP threads keep spinning",
                     std::strerror(errno))
      << std::endl;
}

} // namespace

bool setPassiveOmpWait(const TrainerConfig &config) {
  if (config.ompWait != "passive" || std::getenv("OMP_WAIT_POLICY") ||
      std::getenv("GOMP_SPINCOUNT"))
    return false;
  return ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1) == 0;
}

std::vector<std::string> withoutLauncherFlags(const std::vector<std::string> &args,
                                              const std::vector<std::string> &flags) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    bool dropped = false;
    for (const std::string &flag : flags) {
      if (args[i] == flag) {
        ++i; // and its value
        dropped = true;
      } else if (args[i].rfind(flag + "=", 0) == 0) {
        dropped = true;
      }
      if (dropped)
        break;
    }
    if (!dropped)
      out.push_back(args[i]);
  }
  return out;
}

int runCommand(const RunOptions &o, std::ostream &out, std::ostream &err) {
  auto config = loadTrainerConfig(o.config, o.overrides);
  if (!config)
    return fail(config.status(), err);
  if (o.printConfig) {
    out << describeConfig(*config);
    return 0;
  }
  const bool passive = setPassiveOmpWait(*config);
  if (o.nprocPerNode > 0) {
    if (Status nested = checkNotOneTaskOfMany(); !nested.isOk())
      return fail(nested, err);
    LaunchOptions launch; // its workers inherit the environment
    launch.nprocPerNode = o.nprocPerNode;
    launch.executable = selfExecutable();
    launch.workerArgs = withoutLauncherFlags(o.argv);
    out.flush();
    return runLocalWorkers(launch);
  }
  if (passive)
    runAgain(o.argv, out, err); // a worker started without the launcher
  auto env = readLaunchEnv();
  if (!env)
    return fail(env.status(), err);
  Status st = runTrainer(*config, *env, out);
  if (!st.isOk())
    return fail(st, err);
  return 0;
}

} // namespace nnsc::rt
