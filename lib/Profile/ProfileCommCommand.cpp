// nnsc-profile-comm's flags and its two roles: the supervising launcher
// (--nproc) and the worker.
#include "nnsc/Profile/ProfileComm.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ostream>

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "CommBench.h"
#include "nnsc/Profile/HostInfo.h"
#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Runtime/Launcher.h"
#include "nnsc/Runtime/RunCommand.h"

namespace nnsc::profile {

namespace {

constexpr const char *kTool = "nnsc-profile-comm";

int fail(const Status &st, std::ostream &err) {
  err << st.message() << std::endl;
  return static_cast<int>(st.kind());
}

Status commandLineError(const Status &st) { return st.withContext("command line: error"); }

// Past a day an operation has hung; past ~1e15 s the milliseconds the
// backends take overflow to a negative timeout.
constexpr double kMaxTimeoutSeconds = 86400;

double gib(double bytes) { return bytes / double(int64_t(1) << 30); }

// Message buffers one rank holds at once for the largest size, in units of
// that size: all_to_all and send_recv an input and an output, all_gather and
// reduce_scatter the parts and their sum (at most 1.5 x), the rest one.
int buffersPerRank(const std::vector<Collective> &collectives) {
  int most = 1;
  for (Collective c : collectives)
    if (c != Collective::AllReduce && c != Collective::Broadcast)
      most = 2;
  return most;
}

// The gloo workers' buffers are host memory: refuse sizes whose buffers on
// all local ranks need more than this node has, or more than one process may
// map (ulimit -v), before any worker starts.
Status checkHostMemory(const CommPlan &plan, const std::string &sizesText, int localRanks) {
  if (plan.backend != "gloo" || plan.sizes.empty())
    return Status::ok();
  int buffers = buffersPerRank(plan.collectives);
  double perRank = double(plan.sizes.back()) * buffers;
  double need = perRank * localRanks;
  double have = double(memTotalBytes());
  if (have > 0 && need > have)
    return commandLineError(errorf(
        "--sizes {} needs {:.1f} GiB on this node ({} rank{} x {} buffer{} of {:.1f} GiB), more "
        "than the {:.1f} GiB it has",
        sizesText, gib(need), localRanks, localRanks == 1 ? "" : "s", buffers,
        buffers == 1 ? "" : "s", gib(double(plan.sizes.back())), gib(have)));
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      perRank > double(limit.rlim_cur))
    return commandLineError(
        errorf("--sizes {} needs {:.1f} GiB in each rank ({} buffer{} of {:.1f} GiB), more than "
               "the address-space limit of {:.1f} GiB a process has (ulimit -v)",
               sizesText, gib(perRank), buffers, buffers == 1 ? "" : "s",
               gib(double(plan.sizes.back())), gib(double(limit.rlim_cur))));
  return Status::ok();
}

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

Expected<int64_t> parseByteSize(const std::string &text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  std::string unit = text.substr(digits);
  static const std::vector<std::pair<std::vector<std::string>, int64_t>> units = {
      {{"", "B"}, 1},
      {{"K", "KB", "KiB"}, int64_t(1) << 10},
      {{"M", "MB", "MiB"}, int64_t(1) << 20},
      {{"G", "GB", "GiB"}, int64_t(1) << 30}};
  for (const auto &[names, scale] : units)
    if (digits > 0 && digits <= 12 && std::count(names.begin(), names.end(), unit))
      return std::stoll(text.substr(0, digits)) * scale;
  return errorf("bad byte size '{}'; expected a number with an optional unit B, KiB, MiB or GiB "
                "(e.g. 64MiB)",
                text);
}

Expected<std::vector<int64_t>> parseSizeLadder(const std::string &text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t colon; (colon = text.find(':', start)) != std::string::npos; start = colon + 1)
    parts.push_back(text.substr(start, colon - start));
  parts.push_back(text.substr(start));
  if (parts.size() < 2 || parts.size() > 3)
    return errorf("bad --sizes '{}'; expected MIN:MAX or MIN:MAX:FACTOR (e.g. 1KiB:64MiB:4)", text);
  auto lo = parseByteSize(parts[0]), hi = parseByteSize(parts[1]);
  if (!lo)
    return lo.status();
  if (!hi)
    return hi.status();
  int64_t factor = 4;
  if (parts.size() == 3) {
    bool digitsOnly = !parts[2].empty() && parts[2].size() < 6 &&
                      std::all_of(parts[2].begin(), parts[2].end(), ::isdigit);
    factor = digitsOnly ? std::stoll(parts[2]) : 0;
    if (factor < 2)
      return errorf("bad --sizes '{}': the factor '{}' must be an integer >= 2", text, parts[2]);
  }
  if (*lo < 4)
    return errorf("bad --sizes '{}': the smallest message must be at least 4 bytes (one float)",
                  text);
  if (*hi < *lo)
    return errorf("bad --sizes '{}': the largest message is smaller than the smallest", text);
  std::vector<int64_t> sizes;
  for (int64_t s = *lo; s <= *hi; s *= factor)
    sizes.push_back(s);
  return sizes;
}

std::vector<int> groupSizes(int worldSize) {
  std::vector<int> sizes;
  for (int g = 2; g <= worldSize; g *= 2)
    sizes.push_back(g);
  if (worldSize >= 2 && (sizes.empty() || sizes.back() != worldSize))
    sizes.push_back(worldSize);
  return sizes;
}

int64_t messageElements(int64_t bytes, int group) {
  int64_t elements = bytes / 4 / group * group;
  return std::max<int64_t>(elements, group);
}

Status checkWritable(const std::string &path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return errorf("{}: error: cannot write the output: it is a directory", path);
  std::string dir = directoryOf(path);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return errorf("{}: error: cannot write the output: directory '{}' does not exist", path, dir);
  if (::access(dir.c_str(), W_OK) != 0)
    return errorf("{}: error: cannot write the output: directory '{}' is not writable", path, dir);
  return Status::ok();
}

Expected<CommPlan> checkCommOptions(const ProfileCommOptions &o) {
  CommPlan plan;
  if (o.out.empty())
    return commandLineError(errorf("--out names no file"));
  plan.out = o.out;
  if (o.nproc != -1 && o.nproc < 2)
    return commandLineError(
        errorf("--nproc must be at least 2 (a collective needs two ranks), got {}", o.nproc));
  if (o.nproc != -1)
    NNSC_RETURN_IF_ERROR(rt::checkLocalWorkers("--nproc", o.nproc));
  if (o.backend != "gloo" && o.backend != "nccl")
    return commandLineError(errorf("unknown backend '{}'; expected one of: gloo, nccl", o.backend));
  plan.backend = o.backend;
  plan.device = !o.device.empty() ? o.device : o.backend == "gloo" ? "cpu-local" : "cuda-local";
  auto collectives = parseCollectives(o.collectives);
  if (!collectives)
    return commandLineError(collectives.status());
  plan.collectives = collectives.take();
  auto sizes = parseSizeLadder(o.sizes);
  if (!sizes)
    return commandLineError(sizes.status());
  plan.sizes = sizes.take();
  if (o.iters < 1)
    return commandLineError(errorf("--iters must be at least 1, got {}", o.iters));
  if (o.warmup < 0)
    return commandLineError(errorf("--warmup must be at least 0, got {}", o.warmup));
  if (o.rounds < 1)
    return commandLineError(errorf("--rounds must be at least 1, got {}", o.rounds));
  if (!(o.pointSeconds > 0))
    return commandLineError(errorf("--point-seconds must be positive, got {}", o.pointSeconds));
  if (!(o.timeoutSeconds > 0))
    return commandLineError(errorf("--timeout must be positive, got {}", o.timeoutSeconds));
  if (o.timeoutSeconds > kMaxTimeoutSeconds)
    return commandLineError(errorf("--timeout must be at most {} seconds (a day), got {}",
                                   kMaxTimeoutSeconds, o.timeoutSeconds));
  plan.iters = o.iters;
  plan.warmup = o.warmup;
  plan.pointSeconds = o.pointSeconds;
  plan.spin = o.spin;
  if (o.gapMs != -1 && !(o.gapMs >= 0 && o.gapMs <= 1000))
    return commandLineError(errorf("--gap-ms must be between 0 and 1000, got {}", o.gapMs));
  plan.gapMs = o.gapMs != -1 ? o.gapMs : o.backend == "gloo" ? 5 : 0;
  plan.rounds = o.rounds;
  plan.timeout = std::chrono::milliseconds(int64_t(o.timeoutSeconds * 1000));
  return plan;
}

int profileCommCommand(const ProfileCommOptions &o, std::ostream &out, std::ostream &err) {
  auto plan = checkCommOptions(o);
  if (!plan)
    return fail(plan.status(), err);
  if (o.nproc > 0) {
    // Check the output before starting anyone: a bad path fails in a moment.
    if (Status st = checkWritable(plan->out); !st)
      return fail(st, err);
    if (Status st = checkHostMemory(*plan, o.sizes, o.nproc); !st)
      return fail(st, err);
    auto start = std::chrono::steady_clock::now();
    rt::LaunchOptions launch;
    launch.name = kTool;
    launch.nprocPerNode = o.nproc;
    launch.executable = rt::selfExecutable();
    launch.workerArgs = rt::withoutLauncherFlags(o.argv, {"--nproc", "--nproc-per-node"});
    out.flush();
    int code = rt::runLocalWorkers(launch);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (code == 0)
      out << fmt::format("{}: {} workers finished in {:.1f} s (launch to exit)\n", kTool, o.nproc,
                         seconds);
    return code;
  }
  auto env = rt::readLaunchEnv();
  if (!env)
    return fail(env.status(), err);
  if (env->worldSize < 2)
    return fail(commandLineError(
                    errorf("a communication table needs at least 2 ranks but this job has {} (from "
                           "{}); pass --nproc 2 or run under torchrun",
                           env->worldSize, env->source)),
                err);
  if (Status st = checkHostMemory(*plan, o.sizes, env->localWorldSize); !st)
    return fail(st, err);
  Status st = runCommWorker(*plan, *env, out);
  return st ? 0 : fail(st, err);
}

} // namespace nnsc::profile
