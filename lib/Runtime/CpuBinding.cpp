// Binding local workers to shares of the node's CPUs (CpuBinding.h). No LibTorch.
#include "nnsc/Runtime/CpuBinding.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#if defined(__linux__)
#include <sched.h>
#endif

namespace nnsc::rt {

std::vector<int> cpuShare(const std::vector<int> &allowed, int localRank, int localWorldSize) {
  auto n = int64_t(allowed.size());
  if (localWorldSize < 1 || localRank < 0 || localRank >= localWorldSize || n < localWorldSize)
    return {};
  int64_t begin = localRank * n / localWorldSize, end = (localRank + 1) * n / localWorldSize;
  return {allowed.begin() + begin, allowed.begin() + end};
}

std::string cpuListText(const std::vector<int> &cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
      ++j;
    text += fmt::format("{}{}", text.empty() ? "" : ",", cpus[i]);
    if (j > i)
      text += fmt::format("-{}", cpus[j]);
    i = j + 1;
  }
  return text;
}

Status bindLocalWorker(int localRank, int localWorldSize) {
  if (localWorldSize < 2)
    return Status::ok();
  std::vector<int> share = cpuShare(allowedCpus(), localRank, localWorldSize);
  return share.empty() ? Status::ok() : bindProcessToCpus(share);
}

std::string bindLocalWorkerOrWarn(const std::string &tool, int rank, int localRank,
                                  int localWorldSize) {
  Status bound = bindLocalWorker(localRank, localWorldSize);
  return bound.isOk() ? std::string()
                      : fmt::format("{}: warning: rank {}: {}; running unbound\n", tool, rank,
                                    bound.message());
}

#if defined(__linux__)

std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      cpus.push_back(c);
  return cpus;
}

Status bindProcessToCpus(const std::vector<int> &cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE)
      return errorf("cannot bind to CPU {}: out of range", c);
    CPU_SET(c, &set);
  }
  // Threads started before now (the BLAS pool, the allocator's) are bound one
  // by one; this thread last, so that none it starts from here escapes.
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    int tid = std::atoi(entry.path().filename().c_str());
    // A thread that has exited since the listing is no longer ours to bind.
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH)
      return errorf("cannot bind thread {} to CPUs {}: {}", tid, cpuListText(cpus),
                    std::strerror(errno));
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return errorf("cannot bind to CPUs {}: {}", cpuListText(cpus), std::strerror(errno));
  return Status::ok();
}

#else

std::vector<int> allowedCpus() { return {}; }

Status bindProcessToCpus(const std::vector<int> &cpus) {
  return errorf("cannot bind to CPUs {}: CPU binding needs Linux", cpuListText(cpus));
}

#endif

} // namespace nnsc::rt
