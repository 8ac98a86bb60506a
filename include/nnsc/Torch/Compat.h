/// The differences between the LibTorch releases nnsc builds against (Debian's
/// 1.13, Debian 13's 2.6, CUDA wheels 2.x), in one place. Only code that
/// already sees LibTorch (Trace, Runtime, profilers) includes this header.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#define NNSC_TORCH_AT_LEAST(major, minor)                                                          \
  (TORCH_VERSION_MAJOR > (major) ||                                                                \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace nnsc::torchcompat {

/// Whether this LibTorch's TCPStore can use libuv (2.4+ asks for it by
/// default, server and client alike, and a LibTorch built without it, such as
/// Debian's 2.6, refuses). LibTorch does not export its own query, so the
/// answer comes from starting a libuv server on an ephemeral loopback port
/// once per process.
inline bool libuvStoreAvailable() {
#if NNSC_TORCH_AT_LEAST(2, 4)
  static const bool available = [] {
    c10d::TCPStoreOptions probe;
    probe.port = 0;
    probe.isServer = true;
    probe.waitWorkers = false;
    probe.useLibUV = true;
    try {
      c10d::TCPStore store("127.0.0.1", probe);
      return true;
    } catch (const std::exception &) {
      return false;
    }
  }();
  return available;
#else
  return false;
#endif
}

/// Store options for this LibTorch: libuv where it has it, the classic
/// TCPStore otherwise.
inline c10d::TCPStoreOptions tcpStoreOptions() {
  c10d::TCPStoreOptions opts;
#if NNSC_TORCH_AT_LEAST(2, 4)
  opts.useLibUV = libuvStoreAvailable();
#endif
  return opts;
}

} // namespace nnsc::torchcompat
