// Binding local workers to shares of the node's CPUs: the shares, and that
// every thread of the process, present and future, is bound.
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>

#include "../CatchCompat.h"

#include "nnsc/Runtime/CpuBinding.h"

using namespace nnsc::rt;
using Catch::Matchers::ContainsSubstring;

namespace {

std::vector<int> affinityOf(int tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(tid, sizeof(set), &set) != 0)
    return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set))
      cpus.push_back(c);
  return cpus;
}

std::vector<int> threadIds() {
  std::vector<int> tids;
  for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task"))
    tids.push_back(std::stoi(entry.path().filename().string()));
  return tids;
}

// Puts the process's CPUs back however the test ends.
struct RestoreCpus {
  std::vector<int> cpus = allowedCpus();
  ~RestoreCpus() { (void)bindProcessToCpus(cpus); }
};

} // namespace

TEST_CASE("cpu binding: each local worker gets a contiguous share", "[runtime][cpus]") {
  CHECK(cpuShare({0, 1, 2, 3}, 0, 2) == std::vector<int>{0, 1});
  CHECK(cpuShare({0, 1, 2, 3}, 1, 2) == std::vector<int>{2, 3});
  CHECK(cpuShare({0, 1, 2}, 0, 2) == std::vector<int>{0});
  CHECK(cpuShare({0, 1, 2}, 1, 2) == std::vector<int>{1, 2});
  CHECK(cpuShare({2, 5, 7, 9}, 1, 2) == std::vector<int>{7, 9}); // a cpuset's CPUs, in order
  CHECK(cpuShare({0, 1}, 1, 2) == std::vector<int>{1});
  CHECK(cpuShare({4}, 0, 2).empty()); // fewer CPUs than workers: they share
  CHECK(cpuShare({0, 1}, 2, 2).empty());
  CHECK(cpuShare({0, 1}, 0, 0).empty());
  CHECK(cpuListText({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(cpuListText({5}) == "5");
  CHECK(cpuListText({1, 3, 4}) == "1,3-4");
  CHECK(cpuListText({}).empty());
}

TEST_CASE("cpu binding: every thread, started before or after, is bound", "[runtime][cpus]") {
  RestoreCpus restore;
  if (restore.cpus.size() < 2) {
    WARN("one CPU: nothing to bind a share of");
    return;
  }
  std::atomic<bool> done{false};
  std::thread before([&] {
    while (!done)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::vector<int> last{restore.cpus.back()};
  REQUIRE(bindProcessToCpus(last).isOk());
  for (int tid : threadIds()) {
    INFO("thread " << tid);
    CHECK(affinityOf(tid) == last);
  }
  std::vector<int> after;
  std::thread([&] { after = affinityOf(0); }).join();
  CHECK(after == last);
  done = true;
  before.join();

  // The second of two workers gets the upper half; a single worker is left alone.
  REQUIRE(bindProcessToCpus(restore.cpus).isOk());
  REQUIRE(bindLocalWorker(1, 2).isOk());
  CHECK(affinityOf(0) == cpuShare(restore.cpus, 1, 2));
  REQUIRE(bindProcessToCpus(restore.cpus).isOk());
  REQUIRE(bindLocalWorker(0, 1).isOk());
  CHECK(affinityOf(0) == restore.cpus);
  CHECK(bindLocalWorkerOrWarn("tool", 0, 0, 1).empty());
}

TEST_CASE("cpu binding: a CPU that cannot be had is named", "[runtime][cpus]") {
  RestoreCpus restore;
  auto s = bindProcessToCpus({-1});
  CHECK_THAT(s.message(), ContainsSubstring("cannot bind to CPU -1: out of range"));
  s = bindProcessToCpus({CPU_SETSIZE - 1}); // in range, but no such CPU here
  REQUIRE(!s.isOk());
  CHECK_THAT(s.message(), ContainsSubstring(fmt::format("to CPUs {}", CPU_SETSIZE - 1)));
  CHECK(affinityOf(0) == restore.cpus);
}
