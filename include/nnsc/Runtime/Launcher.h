#pragma once
/// The local supervisor of `nnsc-run --nproc-per-node N`: starts N workers
/// (the same executable, with torchrun's environment: RANK, WORLD_SIZE,
/// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=a port
/// it holds reserved while they run), forwards their output line by line with a "[rank r] " prefix (rank
/// 0's standard output plain), and if one dies — a signal or a non-zero
/// exit — reports it, sends SIGTERM to the others, SIGKILL after a grace
/// period, and returns non-zero. No LibTorch.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// The most workers one launcher starts: each is a LibTorch process (about
/// 70 MiB before it does anything), so a count from a typo must be refused
/// before the first fork, not found out by the machine running out of memory.
inline constexpr int64_t kMaxLocalWorkers = 512;

/// `n` as given to `flag` (--nproc-per-node, --nproc) checked against 1 ..
/// kMaxLocalWorkers; the error is a command-line error naming the flag and value.
Status checkLocalWorkers(const char *flag, int64_t n);

struct LaunchOptions {
  int nprocPerNode = 1;
  std::string executable;              ///< the worker binary (absolute path)
  std::vector<std::string> workerArgs; ///< its arguments, without argv[0]
  double graceSeconds = 5.0;           ///< between SIGTERM and SIGKILL
  int masterPort = 0;                  ///< 0 = pick a free port
  std::string name = "nnsc-run";       ///< the tool named in the launcher's errors
};

/// Runs the workers to the end; returns the launcher's exit code: 0 when
/// all succeed, 1 when the first failure was a worker's exit code 1 (bad
/// input), 2 otherwise.
int runLocalWorkers(const LaunchOptions &options);

/// A TCP port on 127.0.0.1 kept bound for the reservation's lifetime, with
/// SO_REUSEADDR and without listening: rank 0's rendezvous store (which sets
/// SO_REUSEADDR too) can still bind it, while no other bind(0) or outgoing
/// connection on this machine is handed the same port in the meantime — so
/// two launchers started at once never share a store.
class PortReservation {
public:
  PortReservation();
  ~PortReservation();
  PortReservation(const PortReservation &) = delete;
  PortReservation &operator=(const PortReservation &) = delete;
  int port() const { return port_; } ///< 0 when no port could be bound

private:
  int fd_ = -1;
  int port_ = 0;
};

/// This process's executable (from /proc/self/exe).
std::string selfExecutable();

} // namespace nnsc::rt
