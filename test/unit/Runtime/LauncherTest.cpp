// The local supervisor: environment of the workers, exit codes, and that a
// dead worker brings the others down quickly.
#include "../CatchCompat.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
}

TEST_CASE("launcher: a reserved port is not handed out again while held", "[runtime][launcher]") {
  PortReservation held;
  REQUIRE(held.port() > 0);
  // Other reservations (and so other launchers) get other ports.
  std::vector<std::unique_ptr<PortReservation>> others;
  for (int i = 0; i < 200; ++i) {
    others.push_back(std::make_unique<PortReservation>());
    REQUIRE(others.back()->port() > 0);
    CHECK(others.back()->port() != held.port());
  }
  // A listener that sets SO_REUSEADDR, as the rendezvous store does, can still
  // bind and listen on the held port.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(held.port()));
  CHECK(::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
  CHECK(::listen(fd, 4) == 0);
  ::close(fd);
}

TEST_CASE("launcher: a killed worker stops the others", "[runtime][launcher]") {
  auto start = std::chrono::steady_clock::now();
  // rank 1 kills itself; rank 0 would sleep for a minute (and ignores nothing).
  int rc = runLocalWorkers(shell(2, "if [ $RANK = 1 ]; then kill -9 $$; fi; exec sleep 60"));
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(rc == 2);
  CHECK(secs < 10);
}

TEST_CASE("launcher: a crash decides the exit code over a peer's failure after it",
          "[runtime][launcher]") {
  // Rank 1 dies of SIGKILL; rank 0's collective then fails (exit 2, as a
  // worker whose peer vanished exits): the job failed, exit 2.
  for (int i = 0; i < 3; ++i)
    CHECK(runLocalWorkers(shell(2, "if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 0.05; exit 2")) ==
          2);
}

TEST_CASE("launcher: a rank's bad input decides the exit code over its peers' failed collectives",
          "[runtime][launcher]") {
  // Rank 1 refuses its input (exit 1) but is slow to exit; rank 0's
  // collective has already failed (exit 2) and is reaped first. The launcher
  // waits a moment before stopping the others, and the job's exit code is
  // the input's, 1 (hostile corpus: run-resume-world-billion).
  for (int i = 0; i < 3; ++i)
    CHECK(runLocalWorkers(shell(2, "if [ $RANK = 1 ]; then sleep 0.3; exit 1; fi; exit 2")) == 1);
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
