// Host facts for the sources of measured files.
#include "nnsc/Profile/HostInfo.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

namespace nnsc::profile {

std::string hostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0)
    return "unknown-host";
  return buf;
}

std::string isoDateTime() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size())
        return line.substr(colon + 2);
    }
  return "unknown CPU";
}

int64_t memTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value >> unit)
    if (key == "MemTotal:")
      return value * 1024; // the kernel writes kB meaning KiB
  return 0;
}

std::string formatBytes(int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{} {}", bytes, units[u]);
}

} // namespace nnsc::profile
