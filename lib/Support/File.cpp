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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return errorf("{}: error: is a directory, expected a file", path);
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

namespace {

thread_local OutputTransaction *currentTransaction = nullptr;

Status checkWritable(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return errorf("{}: error: cannot write the output: it is a directory", path);
  return Status::ok();
}

// The same file under two spellings (out/p.pb, ./out/p.pb) is one path.
std::string samePathKey(const std::string &path) {
  std::error_code ec;
  auto key = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : key.string();
}

} // namespace

OutputTransaction::OutputTransaction() : outer_(currentTransaction) { currentTransaction = this; }

OutputTransaction::~OutputTransaction() {
  currentTransaction = outer_;
  if (done_)
    return;
  for (const Staged &s : staged_)
    std::remove(s.tmp.c_str());
}

OutputTransaction *OutputTransaction::current() { return currentTransaction; }

Status OutputTransaction::stage(const std::string &tmp, const std::string &path) {
  std::string key = samePathKey(path); // once: a program of many ranks stages thousands
  for (OutputTransaction *t = this; t; t = t->outer_)
    if (t->keys_.count(key))
      return errorf("error: two outputs of this run name the same file {}", path);
  keys_.insert(key);
  staged_.push_back({tmp, path});
  return Status::ok();
}

void OutputTransaction::removeOnCommit(const std::string &path) { removals_.push_back(path); }

Status OutputTransaction::commit() {
  if (outer_) { // the outer transaction replaces them
    for (Staged &s : staged_)
      outer_->staged_.push_back(std::move(s));
    for (std::string &r : removals_)
      outer_->removals_.push_back(std::move(r));
    outer_->keys_.insert(keys_.begin(), keys_.end());
    done_ = true;
    return Status::ok();
  }
  for (const Staged &s : staged_) // nothing is replaced unless everything can be
    NNSC_RETURN_IF_ERROR(checkWritable(s.path));
  done_ = true;
  for (size_t i = 0; i < staged_.size(); ++i) {
    const Staged &s = staged_[i];
    if (std::rename(s.tmp.c_str(), s.path.c_str()) != 0) {
      Status st = errorf("{}: error: cannot rename to {}: {}", s.tmp, s.path, std::strerror(errno));
      for (size_t j = i; j < staged_.size(); ++j)
        std::remove(staged_[j].tmp.c_str());
      return st;
    }
  }
  std::error_code ec;
  for (const std::string &r : removals_)
    std::filesystem::remove(r, ec);
  return Status::ok();
}

Status writeFileAtomicStreamed(
    const std::string &path,
    const std::function<Status(const std::function<Status(std::string_view)> &)> &writer) {
  NNSC_RETURN_IF_ERROR(checkWritable(path));
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  OutputTransaction *transaction = OutputTransaction::current();
  if (transaction)
    NNSC_RETURN_IF_ERROR(transaction->stage(tmp, path));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return errorf("{}: error: cannot create file: {}", tmp, std::strerror(errno));
  Status st = writer([&](std::string_view bytes) { return writeAll(fd, bytes, tmp); });
  if (st.isOk() && ::fsync(fd) != 0)
    st = errorf("{}: error: fsync failed: {}", tmp, std::strerror(errno));
  ::close(fd);
  if (st.isOk() && transaction)
    return st; // renamed by the transaction's commit, removed by its destructor
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
