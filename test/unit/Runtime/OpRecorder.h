#pragma once
// Which operators a piece of code runs: a thread-local RecordFunction
// observer, so tests can tell which kernels a path took where two paths
// compute the same values up to rounding (the fused optimizers and the
// single-tensor ones) and a check with a tolerance cannot.
#include <functional>
#include <set>
#include <string>

#include <ATen/record_function.h>

namespace nnsc::test {

/// The names ("aten::_fused_adamw_", ...) of the operators the dispatcher
/// runs on this thread while `body` runs.
inline std::set<std::string> operatorsRunBy(const std::function<void()> &body) {
  static thread_local std::set<std::string> *seen = nullptr;
  std::set<std::string> names;
  seen = &names;
  at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction &fn) -> std::unique_ptr<at::ObserverContext> {
            if (seen)
              seen->insert(fn.name());
            return nullptr;
          })
          .scopes({at::RecordScope::FUNCTION}));
  body();
  at::removeCallback(handle);
  seen = nullptr;
  return names;
}

} // namespace nnsc::test
