// nnsc-profile-device's flags and its two roles: the supervising launcher
// (--nproc) and the worker.
#include "nnsc/Profile/ProfileDevice.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include <fmt/format.h>

#include "DeviceBench.h"
#include "nnsc/Profile/ProfileComm.h"
#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Runtime/Launcher.h"
#include "nnsc/Runtime/RunCommand.h"

namespace nnsc::profile {

namespace {

// More intra-op threads than any machine has cores hangs the thread pool's
// start (nnsc-run refuses the same); a budget past an hour per matmul size
// is a typo, not a measurement.
constexpr int kMaxThreads = 1024;
constexpr double kMaxSeconds = 3600;

int fail(const Status &st, std::ostream &err) {
  err << st.message() << std::endl;
  return static_cast<int>(st.kind());
}

Status commandLineError(const Status &st) { return st.withContext("command line: error"); }

Expected<std::vector<std::string>> parseDtypes(const std::string &list, const std::string &device) {
  if (list.empty())
    return device == "cuda" ? std::vector<std::string>{"float32", "tf32", "bfloat16", "float16"}
                            : std::vector<std::string>{"float32", "bfloat16"};
  static const std::vector<std::string> known = {"float32", "tf32", "bfloat16", "float16"};
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (std::find(known.begin(), known.end(), item) == known.end())
      return errorf("unknown dtype '{}'; expected one of: {}", item, fmt::join(known, ", "));
    // TF32 is the tensor cores' float32 matmul (nnsc-run's precision.tf32): no CPU has it.
    if (item == "tf32" && device != "cuda")
      return errorf("dtype 'tf32' is measured on cuda only (float32 matmuls on tensor cores), "
                    "not on {}",
                    device);
    if (std::find(out.begin(), out.end(), item) == out.end())
      out.push_back(item);
  }
  if (out.empty())
    return errorf("--dtypes names no dtype");
  return out;
}

Expected<DevicePlan> checkDeviceOptions(const ProfileDeviceOptions &o) {
  DevicePlan plan;
  if (o.out.empty())
    return commandLineError(errorf("--out names no file"));
  if (o.device != "cpu" && o.device != "cuda")
    return commandLineError(errorf("unknown device '{}'; expected one of: cpu, cuda", o.device));
  if (o.nproc != -1 && o.nproc < 1)
    return commandLineError(errorf("--nproc must be at least 1, got {}", o.nproc));
  if (o.nproc != -1)
    NNSC_RETURN_IF_ERROR(rt::checkLocalWorkers("--nproc", o.nproc));
  if (o.threads < 0)
    return commandLineError(
        errorf("--threads must be at least 0 (0: automatic), got {}", o.threads));
  if (o.threads > kMaxThreads)
    return commandLineError(errorf("--threads {} is above the limit of {} (nnsc-run's 'threads')",
                                   o.threads, kMaxThreads));
  if (!(o.seconds > 0))
    return commandLineError(errorf("--seconds must be positive, got {}", o.seconds));
  if (o.seconds > kMaxSeconds)
    return commandLineError(errorf("--seconds {} is above the limit of {} (the time budget of "
                                   "each measured size)",
                                   o.seconds, kMaxSeconds));
  auto dtypes = parseDtypes(o.dtypes, o.device);
  if (!dtypes)
    return commandLineError(dtypes.status());
  plan.out = o.out;
  plan.device = o.device;
  plan.name = !o.name.empty() ? o.name : o.device + "-local";
  plan.threads = o.threads;
  plan.dtypes = dtypes.take();
  plan.seconds = o.seconds;
  return plan;
}

} // namespace

int profileDeviceCommand(const ProfileDeviceOptions &o, std::ostream &out, std::ostream &err) {
  auto plan = checkDeviceOptions(o);
  if (!plan)
    return fail(plan.status(), err);
  if (Status st = checkWritable(plan->out); !st)
    return fail(st, err);
  if (o.nproc > 0) {
    rt::LaunchOptions launch;
    launch.name = "nnsc-profile-device";
    launch.nprocPerNode = o.nproc;
    launch.executable = rt::selfExecutable();
    launch.workerArgs = rt::withoutLauncherFlags(o.argv, {"--nproc", "--nproc-per-node"});
    out.flush();
    return rt::runLocalWorkers(launch);
  }
  auto env = rt::readLaunchEnv();
  if (!env)
    return fail(env.status(), err);
  Status st = runDeviceWorker(*plan, *env, out);
  return st ? 0 : fail(st, err);
}

} // namespace nnsc::profile
