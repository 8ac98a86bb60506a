#pragma once
// Multi-process tests: re-runs this test binary as N worker processes, each
// selecting one hidden Catch2 test case by name, with the launcher variables
// torchrun would set. posix_spawn (fork + exec) is safe after LibTorch has
// started threads, unlike a bare fork. Workers are killed at a deadline.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char **environ;

namespace nnsc::test {

/// Exit status and output of one worker; status is -1 when it was killed at
/// the deadline.
struct WorkerResult {
  int status = -1;
  std::string log;
};

/// A TCP port on 127.0.0.1 that was free a moment ago.
inline int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// The torchrun variables for `rank` of `world` on one node.
inline std::map<std::string, std::string> torchrunEnv(int rank, int world, int port,
                                                      bool agentStore) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(world)},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TORCHELASTIC_USE_AGENT_STORE", agentStore ? "True" : "False"},
          {"NNSC_TEST_WORKER", "1"}};
}

inline pid_t spawnSelf(const std::string &testName, const std::map<std::string, std::string> &vars,
                       const std::string &logPath) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    std::string entry = *e;
    if (!vars.count(entry.substr(0, entry.find('='))))
      env.push_back(entry);
  }
  for (const auto &[k, v] : vars)
    env.push_back(k + "=" + v);
  std::vector<char *> envp;
  for (std::string &e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::vector<char *> argv{exe.data(), const_cast<char *>(testName.c_str()), nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data()) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

/// Runs hidden test `testName` in `vars.size()` workers (worker i gets
/// vars[i]) and waits for all of them, killing any still running at
/// `deadline`. Logs are read back and removed.
inline std::vector<WorkerResult>
runWorkers(const std::string &testName, const std::vector<std::map<std::string, std::string>> &vars,
           std::chrono::seconds deadline) {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (size_t i = 0; i < vars.size(); ++i) {
    logs.push_back(std::string("/tmp/nnsc-worker-") + std::to_string(::getpid()) + "-" +
                   std::to_string(i) + ".log");
    pids.push_back(spawnSelf(testName, vars[i], logs.back()));
  }
  std::vector<WorkerResult> results(vars.size());
  auto end = std::chrono::steady_clock::now() + deadline;
  size_t running = pids.size();
  std::vector<bool> done(pids.size(), false);
  while (running > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      if (done[i] || pids[i] <= 0 || ::waitpid(pids[i], &status, WNOHANG) != pids[i]) {
        if (!done[i] && pids[i] <= 0) {
          done[i] = true;
          --running;
        }
        continue;
      }
      done[i] = true;
      --running;
      results[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (running > 0 && std::chrono::steady_clock::now() > end) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
          done[i] = true;
        }
      running = 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t i = 0; i < logs.size(); ++i) {
    std::ifstream in(logs[i]);
    std::stringstream text;
    text << in.rdbuf();
    results[i].log = text.str();
    ::unlink(logs[i].c_str());
  }
  return results;
}

/// True in a process started by runWorkers (hidden worker tests return
/// early otherwise, e.g. when someone runs every test including hidden ones).
inline bool isWorker() { return std::getenv("NNSC_TEST_WORKER") != nullptr; }

} // namespace nnsc::test
