// The local supervisor: environment of the workers, exit codes, and that a
// dead worker brings the others down quickly.
#include "../CatchCompat.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
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

// The launcher's stdout and stderr (both, as under 2>&1) into a pipe that a reader drains only
// after `readAfter`, as a terminal on hold or `| less` would: what it read, and the launcher's
// exit code.
struct Captured {
  int rc = -1;
  std::string text;
  fs::file_time_type readFrom; ///< when the reader began to read
};

Captured runWithSlowReader(const LaunchOptions &o, std::chrono::milliseconds readAfter) {
  std::fflush(stdout);
  std::fflush(stderr);
  int pipeFds[2];
  REQUIRE(::pipe(pipeFds) == 0);
  int savedOut = ::dup(STDOUT_FILENO), savedErr = ::dup(STDERR_FILENO);
  ::dup2(pipeFds[1], STDOUT_FILENO);
  ::dup2(pipeFds[1], STDERR_FILENO);
  ::close(pipeFds[1]);
  Captured c;
  std::thread reader([&] {
    std::this_thread::sleep_for(readAfter);
    c.readFrom = fs::file_time_type::clock::now();
    char buf[65536];
    ssize_t n;
    while ((n = ::read(pipeFds[0], buf, sizeof buf)) > 0)
      c.text.append(buf, size_t(n));
  });
  c.rc = runLocalWorkers(o);
  ::dup2(savedOut, STDOUT_FILENO); // the pipe's last writer gone: the reader sees its end
  ::dup2(savedErr, STDERR_FILENO);
  ::close(savedOut);
  ::close(savedErr);
  reader.join();
  ::close(pipeFds[0]);
  return c;
}

} // namespace

TEST_CASE("launcher: a slow reader gets every line, in order, and the reason a rank failed",
          "[runtime][launcher]") {
  // 1.15 MB from rank 0, more than the launcher queues before it stops reading the workers'
  // pipes, then its reason on stderr and exit 1; rank 1 waits to be stopped. Before, the
  // launcher left 2 s after the last exit and dropped what the pipes still held (the reason
  // among it), or wrote stderr's line into the middle of a stdout line.
  auto c = runWithSlowReader(
      shell(
          2,
          "if [ $RANK = 0 ]; then yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx 2>/dev/null | head -n 11500; echo 'the reason' "
          ">&2; "
          "exit 1; fi; exec sleep 30"),
      std::chrono::seconds(4));
  CHECK(c.rc == 1);
  std::istringstream in(c.text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  REQUIRE(lines.size() >= 11502);
  int64_t xs = 0;
  for (size_t i = 0; i < 11500; ++i)
    xs += lines[i] == std::string(99, 'x');
  CHECK(xs == 11500);
  CHECK(lines[11500] == "[rank 0] the reason");
  CHECK(lines[11501] == "nnsc-run: error: rank 0 died (exited with code 1)");
}

TEST_CASE("launcher: a reader that takes nothing does not keep it from stopping the job",
          "[runtime][launcher]") {
  // Rank 0 writes 300 KB (more than a pipe holds) and exits 3; rank 1, stopped, notes when its
  // SIGTERM came. The reader sleeps 10 s: before, the launcher blocked in its write until the
  // reader began, unable to reap rank 0 or stop rank 1 (about a second after rank 0's exit
  // here, 5 s under ASan on a loaded machine: the time is not pinned, only the order).
  auto dir = fs::temp_directory_path() / "nnsc-launch-stalled";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto c = runWithSlowReader(
      shell(2, "if [ $RANK = 0 ]; then yes 2>/dev/null | head -c 300000; exit 3; fi; trap 'touch " +
                   (dir / "stopped").string() + "; kill $!; exit 0' TERM; sleep 30 & wait"),
      std::chrono::seconds(10));
  CHECK(c.rc == 2);
  REQUIRE(fs::exists(dir / "stopped"));
  CHECK(fs::last_write_time(dir / "stopped") < c.readFrom);
  CHECK(c.text.find("nnsc-run: error: rank 0 died (exited with code 3)") != std::string::npos);
  fs::remove_all(dir);
}

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
