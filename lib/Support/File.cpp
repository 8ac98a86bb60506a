#include "nnsc/Support/File.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace nnsc {

Expected<std::string> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return errorf("{}: error: cannot open file: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return errorf("{}: error: read failed: {}", path, std::strerror(errno));
  return ss.str();
}

static Status writeAll(int fd, std::string_view bytes, const std::string &path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errorf("{}: error: write failed: {}", path, std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

Status writeFileAtomicStreamed(
    const std::string &path,
    const std::function<Status(const std::function<Status(std::string_view)> &)> &writer) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return errorf("{}: error: cannot create file: {}", tmp, std::strerror(errno));
  Status st = writer([&](std::string_view bytes) { return writeAll(fd, bytes, tmp); });
  if (st.isOk() && ::fsync(fd) != 0)
    st = errorf("{}: error: fsync failed: {}", tmp, std::strerror(errno));
  ::close(fd);
  if (st.isOk() && std::rename(tmp.c_str(), path.c_str()) != 0)
    st = errorf("{}: error: cannot rename to {}: {}", tmp, path, std::strerror(errno));
  if (!st.isOk())
    std::remove(tmp.c_str());
  return st;
}

Status writeFileAtomic(const std::string &path, std::string_view bytes) {
  return writeFileAtomicStreamed(path, [&](const auto &append) { return append(bytes); });
}

Status makeDirs(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return errorf("{}: error: cannot create directory: {}", dir, ec.message());
  return Status::ok();
}

} // namespace nnsc
