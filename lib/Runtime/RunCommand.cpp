#include "nnsc/Runtime/RunCommand.h"

#include <ostream>

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

} // namespace

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
  if (o.nprocPerNode > 0) {
    LaunchOptions launch;
    launch.nprocPerNode = o.nprocPerNode;
    launch.executable = selfExecutable();
    launch.workerArgs = withoutLauncherFlags(o.argv);
    out.flush();
    return runLocalWorkers(launch);
  }
  auto env = readLaunchEnv();
  if (!env)
    return fail(env.status(), err);
  Status st = runTrainer(*config, *env, out);
  if (!st.isOk())
    return fail(st, err);
  return 0;
}

} // namespace nnsc::rt
