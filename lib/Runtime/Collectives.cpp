// Tensor-level collectives along a dimension, built on CommBackend.
#include "nnsc/Runtime/Collectives.h"

#include <atomic>
#include <chrono>

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace nnsc::rt {

namespace {

std::atomic<int64_t> gCollectiveNanos{0};

// Adds the wall time of its scope to what takeCollectiveSeconds reads.
class Timed {
public:
  Timed() : start_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start_)
                  .count();
    gCollectiveNanos.fetch_add(int64_t(ns), std::memory_order_relaxed);
  }
  Timed(const Timed &) = delete;
  Timed &operator=(const Timed &) = delete;

private:
  std::chrono::steady_clock::time_point start_;
};

Expected<int64_t> wrapDim(const at::Tensor &x, int64_t dim, const char *op) {
  int64_t rank = x.dim();
  if (dim < -rank || dim >= rank || rank == 0)
    return errorf("{}: dim {} is out of range for a tensor of {} dims", op, dim, rank);
  return dim < 0 ? dim + rank : dim;
}

Expected<int64_t> wrapSplitDim(const CommBackend &group, const at::Tensor &x, int64_t dim,
                               const char *op) {
  auto d = wrapDim(x, dim, op);
  if (d && x.size(*d) % group.size() != 0)
    return errorf("{}: dim {} of size {} does not split into {} equal chunks ({})", op, *d,
                  x.size(*d), group.size(), group.group().describe());
  return d;
}

} // namespace

Expected<at::Tensor> allReduceTensor(CommBackend &group, const at::Tensor &x, ReduceOp op) {
  Timed timed;
  std::vector<at::Tensor> out{x.clone(at::MemoryFormat::Contiguous)};
  if (group.size() == 1)
    return out[0];
  NNSC_RETURN_IF_ERROR(group.allReduce(out, op)->wait());
  return out[0];
}

Expected<at::Tensor> allGatherTensor(CommBackend &group, const at::Tensor &x, int64_t dim) {
  Timed timed;
  auto d = wrapDim(x, dim, "allgather");
  if (!d)
    return d.status();
  if (group.size() == 1)
    return x.clone(at::MemoryFormat::Contiguous);
  at::Tensor input = x.contiguous();
  // One buffer of [n, ...x]: the ranks' parts lie back to back in it, which
  // the NCCL backend writes without staging; along dim 0 the result is a
  // view of it, along another one copy (as cat would make).
  std::vector<int64_t> shape{group.size()};
  shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
  at::Tensor gathered = at::empty(shape, input.options());
  std::vector<at::Tensor> parts = gathered.unbind(0);
  NNSC_RETURN_IF_ERROR(group.allGather(input, parts)->wait());
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes[size_t(*d)] *= group.size();
  return gathered.movedim(0, *d).reshape(sizes);
}

Expected<at::Tensor> reduceScatterTensor(CommBackend &group, const at::Tensor &x, int64_t dim) {
  Timed timed;
  auto d = wrapSplitDim(group, x, dim, "reducescatter");
  if (!d)
    return d.status();
  if (group.size() == 1)
    return x.clone(at::MemoryFormat::Contiguous);
  // The chunks back to back in one buffer (x itself along dim 0 when it is
  // contiguous), which the NCCL backend sends without staging.
  std::vector<at::Tensor> chunks =
      *d == 0 ? x.contiguous().chunk(group.size(), 0)
              : at::stack(x.chunk(group.size(), *d)).contiguous().unbind(0);
  at::Tensor out = at::empty_like(chunks[0], at::MemoryFormat::Contiguous);
  NNSC_RETURN_IF_ERROR(group.reduceScatter(chunks, out)->wait());
  return out;
}

Expected<at::Tensor> allToAllTensor(CommBackend &group, const at::Tensor &x, int64_t splitDim,
                                    int64_t concatDim) {
  Timed timed;
  auto split = wrapSplitDim(group, x, splitDim, "alltoall");
  if (!split)
    return split.status();
  auto concat = wrapDim(x, concatDim, "alltoall");
  if (!concat)
    return concat.status();
  // Chunk j of the split dim becomes row j of a contiguous [n, ...] buffer
  // (stack alone may keep a channels-last order, which the backends refuse).
  at::Tensor send = at::stack(x.chunk(group.size(), *split)).contiguous();
  if (group.size() == 1)
    return send[0]; // stack copied already
  at::Tensor received = at::empty_like(send);
  NNSC_RETURN_IF_ERROR(group.allToAll(send, received)->wait());
  return at::cat(received.unbind(0), *concat);
}

Expected<at::Tensor> chunkTensor(const CommBackend &group, const at::Tensor &x, int64_t dim) {
  auto d = wrapSplitDim(group, x, dim, "split");
  if (!d)
    return d.status();
  return x.chunk(group.size(), *d)[group.rank()].clone(at::MemoryFormat::Contiguous);
}

double takeCollectiveSeconds() {
  return double(gCollectiveNanos.exchange(0, std::memory_order_relaxed)) * 1e-9;
}

} // namespace nnsc::rt
