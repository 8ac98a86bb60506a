// Buffers kept equal across data-parallel copies (BufferSync.h).
#include "nnsc/Runtime/BufferSync.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::rt {

Expected<BufferPolicy> bufferPolicyOf(const std::string &name) {
  if (name == "broadcast")
    return BufferPolicy::Broadcast;
  if (name == "average")
    return BufferPolicy::Average;
  return errorf("unknown buffer policy '{}'; expected one of: broadcast, average", name);
}

BufferSync::BufferSync(std::shared_ptr<CommBackend> group, std::vector<at::Tensor> buffers,
                       std::vector<std::string> names)
    : group_(std::move(group)), buffers_(std::move(buffers)), names_(std::move(names)) {}

Status BufferSync::check(const Status &st, const char *what) const {
  if (st.isOk())
    return st;
  return st.withContext(fmt::format("{} buffers {} over {}", what, fmt::join(names_, ", "),
                                    group_->group().describe()));
}

Status BufferSync::broadcast() {
  Status st = group_->broadcast(buffers_, 0)->wait();
  return check(st, "broadcasting");
}

Status BufferSync::average() {
  std::vector<at::Tensor> floating, other;
  for (const at::Tensor &b : buffers_)
    (at::isFloatingType(b.scalar_type()) ? floating : other).push_back(b);
  if (!floating.empty()) {
    NNSC_RETURN_IF_ERROR(check(group_->allReduce(floating)->wait(), "averaging"));
    for (at::Tensor &b : floating)
      b.div_(group_->size());
  }
  if (other.empty())
    return Status::ok();
  return check(group_->broadcast(other, 0)->wait(), "broadcasting");
}

} // namespace nnsc::rt
