#include "nnsc/Runtime/Launcher.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

extern char **environ;

namespace nnsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t gStopSignal = 0;

void onStopSignal(int sig) { gStopSignal = sig; }

// SIGUSR1 and SIGUSR2 pass on to the workers (checkpoint.on_signal: they
// stop with a checkpoint), which the launcher then supervises to their end.
std::atomic<int> gForwardSignal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void onForwardSignal(int sig) { gForwardSignal = sig; }

// What the launcher writes to its stdout and stderr (the workers' lines and its own messages),
// one queue in the order it came, written only as far as the reader takes it without blocking:
// whole lines (a line longer than PIPE_BUF in pieces) of the oldest text, at most PIPE_BUF bytes
// a write, once poll says its file takes more. A stalled reader (a pipe nobody drains, a FIFO)
// then never keeps the launcher from reaping its workers, forwarding signals or stopping the
// job, and stdout and stderr interleave as they came (under 2>&1 too). Past kMaxQueued bytes
// the launcher stops reading the workers' pipes while any runs, so that they wait on their
// writes as they would on a blocked file of their own.
class Output {
public:
  static constexpr size_t kMaxQueued = size_t(1) << 20;

  void add(int fd, std::string_view text) {
    if (text.empty() || broken(fd))
      return;
    if (queue_.empty() || queue_.back().first != fd)
      queue_.emplace_back(fd, std::string());
    queue_.back().second.append(text);
    bytes_ += text.size();
  }

  bool empty() const { return queue_.empty(); }
  bool backlogged() const { return bytes_ > kMaxQueued; }
  /// The file the oldest text goes to (-1 none): the one to poll for POLLOUT.
  int nextFd() const { return queue_.empty() ? -1 : queue_.front().first; }

  // Writes what the files take now; true when they took any.
  bool writeSome() {
    bool wrote = false;
    for (int chunk = 0; chunk < 64 && !queue_.empty(); ++chunk) {
      auto &[fd, text] = queue_.front();
      pollfd p{fd, POLLOUT, 0};
      int ready = ::poll(&p, 1, 0);
      if (ready > 0 && (p.revents & POLLNVAL)) { // a closed stdout or stderr
        drop(fd);
        continue;
      }
      if (ready <= 0 || !(p.revents & (POLLOUT | POLLERR | POLLHUP)))
        break;
      size_t n = std::min<size_t>(text.size(), PIPE_BUF);
      if (size_t nl = text.rfind('\n', n - 1); n < text.size() && nl != std::string::npos)
        n = nl + 1; // whole lines
      ssize_t done = ::write(fd, text.data(), n);
      if (done > 0) {
        text.erase(0, size_t(done));
        bytes_ -= size_t(done);
        wrote = true;
        if (text.empty())
          queue_.pop_front();
      } else if (done < 0 && errno != EINTR && errno != EAGAIN) {
        drop(fd); // the reader is gone (EPIPE and the like): that output goes nowhere
      }
    }
    return wrote;
  }

private:
  bool broken(int fd) const { return fd == STDERR_FILENO ? errBroken_ : outBroken_; }

  void drop(int fd) {
    (fd == STDERR_FILENO ? errBroken_ : outBroken_) = true;
    for (auto it = queue_.begin(); it != queue_.end();)
      if (it->first == fd) {
        bytes_ -= it->second.size();
        it = queue_.erase(it);
      } else {
        ++it;
      }
  }

  std::deque<std::pair<int, std::string>> queue_;
  size_t bytes_ = 0;
  bool outBroken_ = false, errBroken_ = false;
};

struct Stream {
  int fd = -1;
  int outFd = STDOUT_FILENO; ///< where its lines go (the launcher's stdout or stderr)
  std::string prefix;
  std::string pending; ///< an unfinished line
};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
  Stream out, err;
};

std::string describeStatus(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

bool failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

class Supervisor {
public:
  explicit Supervisor(const LaunchOptions &options) : opts_(options) {}

  int run() {
    PortReservation reserved;
    int port = opts_.masterPort ? opts_.masterPort : reserved.port();
    if (port == 0) {
      say("{}: error: cannot reserve a TCP port on 127.0.0.1 for the rendezvous: {}\n", opts_.name,
          std::strerror(errno));
      drainOutput();
      return 2;
    }
    for (int r = 0; r < opts_.nprocPerNode; ++r)
      if (!spawn(r, port)) {
        say("{}: error: cannot start rank {}: {}\n", opts_.name, r, std::strerror(errno));
        beginShutdown();
        exitCode_ = 2;
        break;
      }
    while (anyRunning() || anyOpenStream()) {
      pump(anyRunning() ? 100 : 10);
      if (int sig = stopping_ ? 0 : gForwardSignal.exchange(0)) {
        say("{}: {} forwarded to the workers\n", opts_.name,
            sig == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
        killAll(sig);
      }
      if (gStopSignal && !stopping_) {
        say("{}: received signal {}; stopping the workers\n", opts_.name, int(gStopSignal));
        stopSignal_ = gStopSignal;
        exitCode_ = 2;
        beginShutdown();
      }
      reap();
      sendTermWhenDue();
      if (stopping_ && Clock::now() > killAt_)
        killAll(SIGKILL);
      if (!anyRunning() && Clock::now() > drainUntil())
        break; // a grandchild may hold a pipe open; do not wait for it
    }
    flushPending();
    // Stopped by a signal: a job whose every worker then exited 0 (checkpoint.on_signal: they
    // saved their step) ended as asked.
    if (stopSignal_ && exitCode_ == 2 &&
        std::all_of(workers_.begin(), workers_.end(), [](const Worker &w) {
          return !w.running && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
        })) {
      say("{}: every worker stopped on signal {} and exited 0\n", opts_.name, stopSignal_);
      exitCode_ = 0;
    } else if (stopSignal_) {
      say("{}: error: stopped on signal {}\n", opts_.name, stopSignal_);
    }
    drainOutput();
    return exitCode_;
  }

private:
  bool spawn(int rank, int port) {
    // Everything the child needs is built before fork: between fork and exec
    // only async-signal-safe calls are allowed (LibTorch may run threads).
    std::vector<std::string> env = workerEnv(rank, port), args = {opts_.executable};
    args.insert(args.end(), opts_.workerArgs.begin(), opts_.workerArgs.end());
    std::vector<char *> envp = pointers(env), argv = pointers(args);
    std::string execError =
        fmt::format("{}: error: cannot execute {}\n", opts_.name, opts_.executable);
    int outPipe[2], errPipe[2];
    if (::pipe2(outPipe, O_CLOEXEC) != 0 || ::pipe2(errPipe, O_CLOEXEC) != 0)
      return false;
    const pid_t launcher = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0)
      return false;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGTERM); // die with the launcher
      if (::getppid() != launcher)        // which died before that took effect
        ::_exit(1);
      ::dup2(outPipe[1], STDOUT_FILENO);
      ::dup2(errPipe[1], STDERR_FILENO);
      ::execve(opts_.executable.c_str(), argv.data(), envp.data());
      ssize_t ignored = ::write(STDERR_FILENO, execError.data(), execError.size());
      (void)ignored;
      ::_exit(127);
    }
    ::close(outPipe[1]);
    ::close(errPipe[1]);
    Worker w;
    w.rank = rank;
    w.pid = pid;
    w.running = true;
    std::string prefix = fmt::format("[rank {}] ", rank);
    w.out = Stream{outPipe[0], STDOUT_FILENO, rank == 0 ? "" : prefix, ""};
    w.err = Stream{errPipe[0], STDERR_FILENO, prefix, ""};
    workers_.push_back(std::move(w));
    return true;
  }

  std::vector<std::string> workerEnv(int rank, int port) const {
    std::map<std::string, std::string> set = {
        {"RANK", std::to_string(rank)},
        {"LOCAL_RANK", std::to_string(rank)},
        {"WORLD_SIZE", std::to_string(opts_.nprocPerNode)},
        {"LOCAL_WORLD_SIZE", std::to_string(opts_.nprocPerNode)},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(port)}};
    std::vector<std::string> env;
    for (char **e = environ; *e; ++e) {
      std::string kv = *e, key = kv.substr(0, kv.find('='));
      if (!set.count(key) && key != "TORCHELASTIC_USE_AGENT_STORE")
        env.push_back(kv);
    }
    for (const auto &[k, v] : set)
      env.push_back(k + "=" + v);
    return env;
  }

  static std::vector<char *> pointers(std::vector<std::string> &strings) {
    std::vector<char *> out;
    for (auto &s : strings)
      out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  }

  template <typename... Args> void say(fmt::format_string<Args...> format, Args &&...args) {
    output_.add(STDERR_FILENO, fmt::format(format, std::forward<Args>(args)...));
  }

  // One pass: the workers' pipes read (while any runs, only when the output is not
  // backlogged: once none runs, what is left in them is read to the end) and what is queued
  // written as far as the files take it, waiting at most timeoutMs for either.
  void pump(int timeoutMs) {
    std::vector<pollfd> fds;
    std::vector<Stream *> streams; // nullptr: fds[i] is the output's
    if (!output_.backlogged() || !anyRunning())
      for (auto &w : workers_)
        for (Stream *s : {&w.out, &w.err})
          if (s->fd >= 0) {
            fds.push_back({s->fd, POLLIN, 0});
            streams.push_back(s);
          }
    if (int fd = output_.nextFd(); fd >= 0) {
      fds.push_back({fd, POLLOUT, 0});
      streams.push_back(nullptr);
    }
    if (fds.empty()) {
      ::usleep(timeoutMs * 1000);
      return;
    }
    if (::poll(fds.data(), fds.size(), timeoutMs) <= 0)
      return;
    for (size_t i = 0; i < fds.size(); ++i)
      if (streams[i] && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        readFrom(*streams[i]);
    output_.writeSome();
  }

  // At the end: what is queued, written however slowly the reader takes it, unless a stop
  // signal has come (before or now): then a reader that takes nothing for 2 s is given up on.
  void drainOutput() {
    auto progress = Clock::now();
    while (!output_.empty()) {
      pollfd p{output_.nextFd(), POLLOUT, 0};
      ::poll(&p, 1, 100);
      if (output_.writeSome())
        progress = Clock::now();
      else if (gStopSignal && Clock::now() - progress > std::chrono::seconds(2))
        return;
    }
  }

  // What an ended worker left in its pipes, read before anything is said of its end (its last
  // line is often why it ended); a pipe a child of its own still holds stays for pump.
  void readLastWords(Worker &w) {
    for (Stream *s : {&w.out, &w.err})
      for (int reads = 0; s->fd >= 0 && reads < 64; ++reads) {
        pollfd p{s->fd, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0)
          break;
        readFrom(*s);
      }
  }

  void readFrom(Stream &s) {
    char buf[65536];
    ssize_t n = ::read(s.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      return;
    if (n <= 0) {
      ::close(s.fd);
      s.fd = -1;
      if (!s.pending.empty())
        output_.add(s.outFd, s.prefix + s.pending + "\n");
      s.pending.clear();
      return;
    }
    s.pending.append(buf, size_t(n));
    size_t nl;
    std::string lines;
    while ((nl = s.pending.find('\n')) != std::string::npos) {
      lines += s.prefix + s.pending.substr(0, nl + 1);
      s.pending.erase(0, nl + 1);
    }
    output_.add(s.outFd, lines);
  }

  // Workers that ended since the last pass. When several failed at once, a
  // crash or signal is reported first and decides the exit code: the others
  // most likely exited 1 because that peer vanished.
  void reap() {
    std::vector<Worker *> failedNow;
    for (auto &w : workers_) {
      if (!w.running || ::waitpid(w.pid, &w.status, WNOHANG) != w.pid)
        continue;
      w.running = false;
      lastExit_ = Clock::now();
      readLastWords(w);
      if (failed(w.status) && !stopping_)
        failedNow.push_back(&w);
      else if (stopping_ && exitCode_ == 2 && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 1) {
        // It refused its input after a peer had already failed for that
        // reason (the peer's collective lost it first): the input is what
        // was wrong, and the job's exit code says so.
        say("{}: error: rank {} died ({})\n", opts_.name, w.rank, describeStatus(w.status));
        exitCode_ = 1;
      }
    }
    auto badInput = [](const Worker *w) {
      return WIFEXITED(w->status) && WEXITSTATUS(w->status) == 1;
    };
    // A rank that refused its input first: its peers' failed collectives
    // (exit 2) follow from it, and the job's exit code is its.
    std::stable_sort(failedNow.begin(), failedNow.end(),
                     [&](const Worker *a, const Worker *b) { return badInput(a) && !badInput(b); });
    for (const Worker *w : failedNow)
      say("{}: error: rank {} died ({})\n", opts_.name, w->rank, describeStatus(w->status));
    if (!failedNow.empty()) {
      exitCode_ = badInput(failedNow.front()) ? 1 : 2;
      // A failed collective often means a peer is on its way out for a
      // reason of its own (a bad input, exit 1): give it a moment to exit by
      // itself before the others are stopped, so that reason is the job's.
      beginShutdown(std::chrono::milliseconds(exitCode_ == 2 ? kSettleMs : 0));
    }
  }

  // SIGTERM to the others after `delay`, SIGKILL a grace period later.
  void beginShutdown(std::chrono::milliseconds delay = std::chrono::milliseconds(0)) {
    if (stopping_)
      return;
    stopping_ = true;
    termAt_ = Clock::now() + delay;
    killAt_ = termAt_ + std::chrono::milliseconds(int64_t(opts_.graceSeconds * 1000));
    sendTermWhenDue();
  }

  void sendTermWhenDue() {
    if (stopping_ && !termSent_ && Clock::now() >= termAt_) {
      killAll(SIGTERM);
      termSent_ = true;
    }
  }

  void killAll(int sig) {
    for (auto &w : workers_)
      if (w.running)
        ::kill(w.pid, sig);
  }

  bool anyRunning() const {
    for (const auto &w : workers_)
      if (w.running)
        return true;
    return false;
  }

  bool anyOpenStream() const {
    for (const auto &w : workers_)
      if (w.out.fd >= 0 || w.err.fd >= 0)
        return true;
    return false;
  }

  Clock::time_point drainUntil() const { return lastExit_ + std::chrono::seconds(2); }

  void flushPending() {
    for (auto &w : workers_)
      for (Stream *s : {&w.out, &w.err}) {
        if (!s->pending.empty())
          output_.add(s->outFd, s->prefix + s->pending + "\n");
        if (s->fd >= 0)
          ::close(s->fd);
        s->fd = -1;
      }
  }

  const LaunchOptions &opts_;
  std::vector<Worker> workers_;
  Output output_;
  int stopSignal_ = 0; ///< the SIGTERM or SIGINT that stopped the job, 0 none
  bool stopping_ = false;
  int exitCode_ = 0;
  static constexpr int kSettleMs = 1000;
  Clock::time_point termAt_;
  bool termSent_ = false;
  Clock::time_point killAt_{}, lastExit_{};
};

} // namespace

PortReservation::PortReservation() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    return;
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len) == 0)
    port_ = ntohs(addr.sin_port);
}

PortReservation::~PortReservation() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string selfExecutable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

Status checkLocalWorkers(const char *flag, int64_t n) {
  if (n < 1)
    return errorf("command line: error: impossible {} {}; expected at least 1 local worker", flag,
                  n);
  if (n > kMaxLocalWorkers)
    return errorf("command line: error: {} {} is above the limit of {} local workers", flag, n,
                  kMaxLocalWorkers);
  return Status::ok();
}

int runLocalWorkers(const LaunchOptions &options) {
  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = onForwardSignal;
  ::sigaction(SIGUSR1, &sa, nullptr);
  ::sigaction(SIGUSR2, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return Supervisor(options).run();
}

} // namespace nnsc::rt
