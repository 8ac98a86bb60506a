/// The differences between the LibTorch releases nnsc builds against (Debian's
/// 1.13, Debian 13's 2.6, CUDA wheels 2.x), in one place. Only code that
/// already sees LibTorch (Trace, Runtime, profilers) includes this header.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/version.h>

#define NNSC_TORCH_AT_LEAST(major, minor)                                                    \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace nnsc::torchcompat {

/// Creates a TCPStore. 2.4+ asks for libuv's server by default, which a
/// LibTorch built without libuv (Debian's) refuses; LibTorch does not export
/// its "is libuv available" query, so a server that fails with libuv is
/// retried once with the classic server (a real failure, such as a port in
/// use, fails again and is reported). Clients connect the same either way.
inline c10::intrusive_ptr<c10d::TCPStore> makeTcpStore(const std::string &host,
                                                       c10d::TCPStoreOptions opts) {
#if NNSC_TORCH_AT_LEAST(2, 4)
  if (opts.isServer && opts.useLibUV) {
    try {
      return c10::make_intrusive<c10d::TCPStore>(host, opts);
    } catch (const std::exception &) {
      opts.useLibUV = false;
    }
  }
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, opts);
}

} // namespace nnsc::torchcompat
