#pragma once
/// Errors as values: Status (ok or an error message) and Expected<T>.
///
/// Messages follow the LLVM convention: "file:line:col: error: lower-case text"
/// with no final period. Exceptions from third-party libraries are caught at
/// the boundary and turned into a Status.

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace nnsc {

/// What kind of failure a Status holds; tools map it to an exit code.
enum class ErrorKind { Ok = 0, BadInput = 1, Internal = 2 };

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message, ErrorKind kind = ErrorKind::BadInput) {
    return Status(kind, std::move(message));
  }
  static Status internal(std::string message) {
    return Status(ErrorKind::Internal, std::move(message));
  }

  bool isOk() const { return kind_ == ErrorKind::Ok; }
  explicit operator bool() const { return isOk(); }
  ErrorKind kind() const { return kind_; }
  const std::string &message() const { return message_; }

  /// Returns this error with `context` prepended ("context: message").
  Status withContext(const std::string &context) const {
    if (isOk())
      return *this;
    return Status(kind_, context + ": " + message_);
  }

private:
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  ErrorKind kind_ = ErrorKind::Ok;
  std::string message_;
};

/// Builds a BadInput status from a fmt format string.
template <typename... Args> Status errorf(fmt::format_string<Args...> f, Args &&...args) {
  return Status::error(fmt::format(f, std::forward<Args>(args)...));
}

/// A value or the Status that explains why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : status_(std::move(status)) {}

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }

  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T take() { return std::move(*value_); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace nnsc

/// Returns early from the enclosing function if `expr` is an error Status.
#define NNSC_RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                             \
    ::nnsc::Status nnsc_status_ = (expr);                                                          \
    if (!nnsc_status_.isOk())                                                                      \
      return nnsc_status_;                                                                         \
  } while (0)
