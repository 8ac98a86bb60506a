#pragma once
/// Keeping the buffers of data-parallel copies equal (a manifest
/// BufferSync): BatchNorm's running statistics and any buffer the forward
/// writes are updated by each copy from its own micro-batch. PyTorch DDP's
/// default (broadcast_buffers) sends copy 0's buffers to the other copies
/// before every forward; `average` instead replaces them by their mean over
/// the copies after every forward (integer buffers, such as
/// num_batches_tracked, are broadcast from copy 0: they agree anyway).

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Comm.h"
#include "nnsc/Support/Status.h"

namespace nnsc::rt {

/// How data-parallel copies keep their buffers equal (trainer config key
/// data_parallel.buffers).
enum class BufferPolicy { Broadcast, Average };

/// Parses "broadcast" / "average"; anything else is an error listing both
/// (without location: the caller adds the config key's).
Expected<BufferPolicy> bufferPolicyOf(const std::string &name);

class BufferSync {
public:
  /// `buffers` (contiguous, not requiring grad) are this rank's pieces that
  /// every member of `group` holds too; `names` label errors. Group rank 0
  /// (the lowest global rank) belongs to data-parallel copy 0.
  BufferSync(std::shared_ptr<CommBackend> group, std::vector<at::Tensor> buffers,
             std::vector<std::string> names);

  /// Copies group rank 0's buffers into every member's, in place.
  Status broadcast();
  /// Floating buffers become their mean over the group; the others take
  /// group rank 0's values.
  Status average();

  /// Before a forward: broadcast under BufferPolicy::Broadcast.
  Status beforeForward(BufferPolicy policy) {
    return policy == BufferPolicy::Broadcast ? broadcast() : Status::ok();
  }
  /// After a forward (and its backward, which may still read the buffers
  /// the forward saved): average under BufferPolicy::Average.
  Status afterForward(BufferPolicy policy) {
    return policy == BufferPolicy::Average ? average() : Status::ok();
  }

private:
  Status check(const Status &st, const char *what) const;

  std::shared_ptr<CommBackend> group_;
  std::vector<at::Tensor> buffers_;
  std::vector<std::string> names_;
};

} // namespace nnsc::rt
