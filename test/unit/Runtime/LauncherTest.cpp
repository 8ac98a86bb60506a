// The local supervisor: environment of the workers, exit codes, and that a
// dead worker brings the others down quickly.
#include "../CatchCompat.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nnsc/Runtime/Launcher.h"

using namespace nnsc::rt;
namespace fs = std::filesystem;

namespace {

LaunchOptions shell(int n, const std::string &script) {
  LaunchOptions o;
  o.nprocPerNode = n;
  o.executable = "/bin/sh";
  o.workerArgs = {"-c", script};
  o.graceSeconds = 1;
  return o;
}

std::string readAll(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("launcher: workers get torchrun's environment", "[runtime][launcher]") {
  auto dir = fs::temp_directory_path() / "nnsc-launch-env";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string script = "echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR > " +
                       dir.string() + "/r$RANK; test -n \"$MASTER_PORT\"";
  CHECK(runLocalWorkers(shell(2, script)) == 0);
  CHECK(readAll(dir / "r0") == "0 2 0 2 127.0.0.1\n");
  CHECK(readAll(dir / "r1") == "1 2 1 2 127.0.0.1\n");
  fs::remove_all(dir);
  CHECK(pickFreePort() > 0);
}

TEST_CASE("launcher: a killed worker stops the others", "[runtime][launcher]") {
  auto start = std::chrono::steady_clock::now();
  // rank 1 kills itself; rank 0 would sleep for a minute (and ignores nothing).
  int rc = runLocalWorkers(shell(2, "if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 60"));
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(rc == 2);
  CHECK(secs < 10);
}

TEST_CASE("launcher: exit code 1 of a worker is passed on", "[runtime][launcher]") {
  CHECK(runLocalWorkers(shell(2, "exit 1")) == 1);
  CHECK(runLocalWorkers(shell(3, "[ $RANK = 2 ] && exit 5; exit 0")) == 2);
}

TEST_CASE("launcher: a worker ignoring SIGTERM is killed after the grace period",
          "[runtime][launcher]") {
  auto start = std::chrono::steady_clock::now();
  int rc =
      runLocalWorkers(shell(2, "if [ $RANK = 1 ]; then exit 3; fi; trap '' TERM; exec sleep 30"));
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(rc == 2);
  CHECK(secs < 10);
}
