#pragma once
/// Facts about the machine a measurement ran on, for the sources and
/// descriptions of measured files. No LibTorch.

#include <cstdint>
#include <string>

namespace nnsc::profile {

/// This host's name (gethostname); "unknown-host" when it cannot be read.
std::string hostName();

/// The current UTC time, ISO 8601: "2025-01-31T12:00:00Z".
std::string isoDateTime();

/// The CPU's "model name" from /proc/cpuinfo; "unknown CPU" when absent.
std::string cpuModel();

/// MemTotal from /proc/meminfo in bytes; 0 when it cannot be read.
int64_t memTotalBytes();

/// "1 KiB", "16 MiB", "3 B": a byte count in the largest binary unit that
/// divides it (else plain bytes).
std::string formatBytes(int64_t bytes);

} // namespace nnsc::profile
