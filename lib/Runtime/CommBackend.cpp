// CommBackend: argument checks shared by every backend, the loud default for
// operations a backend lacks, and the process-global group registry.
#include "nnsc/Runtime/Comm.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <fmt/format.h>

#include "Backends.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

namespace {

class FinishedWork : public Work {
public:
  explicit FinishedWork(Status status) : Work(std::chrono::milliseconds(0)), status_(status) {}
  Status wait(std::chrono::milliseconds) override { return status_; }

private:
  Status status_;
};

std::string shapeOf(const at::Tensor &t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); }

// Same shape, dtype and device as `like`, for the outputs of a collective.
Status checkLike(const at::Tensor &t, const at::Tensor &like, const char *what) {
  if (!t.defined())
    return errorf("{} is an undefined tensor", what);
  if (t.sizes() != like.sizes())
    return errorf("{} has shape {}, expected {}", what, shapeOf(t), shapeOf(like));
  if (t.scalar_type() != like.scalar_type())
    return errorf("{} has dtype {}, expected {}", what, c10::toString(t.scalar_type()),
                  c10::toString(like.scalar_type()));
  if (t.device() != like.device())
    return errorf("{} is on {}, expected {}", what, t.device().str(), like.device().str());
  return Status::ok();
}

Status checkPeer(int peer, int rank, int size, const char *what) {
  if (peer < 0 || peer >= size)
    return errorf("{} {} is out of range for a group of {}", what, peer, size);
  if (peer == rank)
    return errorf("{} {} is this rank itself", what, peer);
  return Status::ok();
}

std::mutex registryMutex;
std::map<int, std::shared_ptr<CommBackend>> &registry() {
  static std::map<int, std::shared_ptr<CommBackend>> groups;
  return groups;
}

} // namespace

at::Tensor backToBack(const std::vector<at::Tensor> &parts) {
  if (parts.empty())
    return {};
  const at::Tensor &first = parts[0];
  int64_t total = 0;
  const char *next = nullptr;
  for (const at::Tensor &p : parts) {
    if (!p.defined() || !p.has_storage() || p.numel() == 0 || !p.is_contiguous() ||
        p.scalar_type() != first.scalar_type() || p.device() != first.device() ||
        !p.is_alias_of(first))
      return {};
    const char *at = static_cast<const char *>(p.data_ptr());
    if (next && at != next)
      return {};
    next = at + p.numel() * static_cast<int64_t>(p.element_size());
    total += p.numel();
  }
  return first.detach().as_strided({total}, {1});
}

bool overlaps(const at::Tensor &a, const at::Tensor &b) {
  if (!a.is_contiguous() || !b.is_contiguous())
    return true;
  if (a.numel() == 0 || b.numel() == 0)
    return false;
  // As integers: `<` between pointers into different allocations is unspecified.
  auto begin = [](const at::Tensor &t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); };
  auto end = [&](const at::Tensor &t) {
    return begin(t) + static_cast<uintptr_t>(t.numel()) * t.element_size();
  };
  return begin(a) < end(b) && begin(b) < end(a);
}

bool allGatherDirect(const at::Tensor &in, const std::vector<at::Tensor> &outputs, int rank,
                     at::Tensor &flat) {
  flat = backToBack(outputs);
  if (!flat.defined())
    return false;
  if (!overlaps(in, flat))
    return true;
  const at::Tensor &own = outputs[static_cast<size_t>(rank)];
  return in.is_contiguous() && in.data_ptr() == own.data_ptr() && in.numel() == own.numel();
}

bool reduceScatterDirect(const at::Tensor &sent, const std::vector<at::Tensor> &inputs,
                         const at::Tensor &output, int rank) {
  if (!output.is_contiguous())
    return false;
  if (!overlaps(output, sent))
    return true;
  const at::Tensor &own = inputs[static_cast<size_t>(rank)];
  return sent.data_ptr() == inputs[0].data_ptr() && output.data_ptr() == own.data_ptr() &&
         output.numel() == own.numel();
}

std::shared_ptr<Work> Work::finished(Status status) {
  return std::make_shared<FinishedWork>(std::move(status));
}

std::string GroupInfo::describe() const {
  if (id == kWorldGroup)
    return fmt::format("the world group ({} ranks)", ranks.size());
  if (id == kPipelineChannelGroup)
    return fmt::format("a pipeline channel (global ranks {})", fmt::join(ranks, ","));
  return fmt::format("group {} (global ranks {})", id, fmt::join(ranks, ","));
}

std::string CommBackend::context(const char *op) const {
  return fmt::format("{} {} on {}, rank {} (global rank {})", name(), op, group_.describe(),
                     group_.rank, group_.ranks.at(group_.rank));
}

WorkPtr CommBackend::unsupported(const char *op) const {
  return Work::finished(errorf("backend '{}' does not support {}", name(), op));
}

WorkPtr CommBackend::invalid(const char *op, const Status &why) const {
  return Work::finished(why.withContext(context(op)));
}

WorkPtr CommBackend::allReduce(std::vector<at::Tensor> &tensors, ReduceOp op) {
  if (tensors.empty())
    return invalid("allreduce", errorf("no tensors given"));
  for (const at::Tensor &t : tensors)
    if (!t.defined())
      return invalid("allreduce", errorf("an input is an undefined tensor"));
  return doAllReduce(tensors, op);
}

WorkPtr CommBackend::allGather(const at::Tensor &input, std::vector<at::Tensor> &outputs) {
  if (!input.defined())
    return invalid("allgather", errorf("the input is an undefined tensor"));
  if (static_cast<int>(outputs.size()) != size())
    return invalid("allgather", errorf("expected {} outputs, got {}", size(), outputs.size()));
  for (const at::Tensor &t : outputs)
    if (Status s = checkLike(t, input, "an output"); !s)
      return invalid("allgather", s);
  return doAllGather(input, outputs);
}

WorkPtr CommBackend::reduceScatter(const std::vector<at::Tensor> &inputs, at::Tensor &output,
                                   ReduceOp op) {
  if (!output.defined())
    return invalid("reducescatter", errorf("the output is an undefined tensor"));
  if (static_cast<int>(inputs.size()) != size())
    return invalid("reducescatter", errorf("expected {} inputs, got {}", size(), inputs.size()));
  for (const at::Tensor &t : inputs)
    if (Status s = checkLike(t, output, "an input"); !s)
      return invalid("reducescatter", s);
  return doReduceScatter(inputs, output, op);
}

WorkPtr CommBackend::allToAll(const at::Tensor &input, at::Tensor &output) {
  if (!input.defined())
    return invalid("alltoall", errorf("the input is an undefined tensor"));
  if (Status s = checkLike(output, input, "the output"); !s)
    return invalid("alltoall", s);
  if (input.dim() == 0 || input.size(0) % size() != 0)
    return invalid("alltoall", errorf("dim 0 of shape {} does not split into {} equal parts",
                                      shapeOf(input), size()));
  if (!input.is_contiguous() || !output.is_contiguous())
    return invalid("alltoall", errorf("input and output must be contiguous"));
  return doAllToAll(input, output);
}

WorkPtr CommBackend::broadcast(std::vector<at::Tensor> &tensors, int root) {
  if (root < 0 || root >= size())
    return invalid("broadcast", errorf("root {} is out of range for a group of {}", root, size()));
  if (tensors.empty())
    return invalid("broadcast", errorf("no tensors given"));
  return doBroadcast(tensors, root);
}

WorkPtr CommBackend::send(const at::Tensor &tensor, int dst, int tag) {
  if (Status s = checkPeer(dst, rank(), size(), "destination"); !s)
    return invalid("send", s);
  if (!tensor.defined() || !tensor.is_contiguous())
    return invalid("send", errorf("the tensor must be defined and contiguous"));
  return doSend(tensor, dst, tag);
}

WorkPtr CommBackend::recv(at::Tensor &tensor, int src, int tag) {
  if (Status s = checkPeer(src, rank(), size(), "source"); !s)
    return invalid("recv", s);
  if (!tensor.defined() || !tensor.is_contiguous())
    return invalid("recv", errorf("the tensor must be defined and contiguous"));
  return doRecv(tensor, src, tag);
}

WorkPtr CommBackend::barrier() { return doBarrier(); }

WorkPtr CommBackend::doAllReduce(std::vector<at::Tensor> &, ReduceOp) {
  return unsupported("allreduce");
}
WorkPtr CommBackend::doAllGather(const at::Tensor &, std::vector<at::Tensor> &) {
  return unsupported("allgather");
}
WorkPtr CommBackend::doReduceScatter(const std::vector<at::Tensor> &, at::Tensor &, ReduceOp) {
  return unsupported("reducescatter");
}
WorkPtr CommBackend::doAllToAll(const at::Tensor &, at::Tensor &) {
  return unsupported("alltoall");
}
WorkPtr CommBackend::doBroadcast(std::vector<at::Tensor> &, int) {
  return unsupported("broadcast");
}
WorkPtr CommBackend::doSend(const at::Tensor &, int, int) { return unsupported("send"); }
WorkPtr CommBackend::doRecv(at::Tensor &, int, int) { return unsupported("recv"); }
WorkPtr CommBackend::doBarrier() { return unsupported("barrier"); }

Expected<std::shared_ptr<CommBackend>>
createBackend(const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
              const std::string &prefix, const CommOptions &options, const LaunchEnv &env) {
  if (options.backend == "gloo") {
#ifdef NNSC_HAVE_GLOO
    return createGlooBackend(group, store, prefix, options, env);
#else
    return errorf("backend 'gloo' is not available in this build: the LibTorch it was built "
                  "against ({}) has no gloo headers (gloo/algorithm.h), as a pip wheel's has "
                  "none; train on device cuda (nccl), or build against a LibTorch with Gloo "
                  "(Debian's libtorch-dev and libgloo-dev)",
                  NNSC_TORCH_PREFIX_TEXT);
#endif
  }
  if (options.backend == "nccl") {
#ifdef NNSC_HAVE_NCCL
    return createNcclBackend(group, store, prefix, options, env);
#else
    return errorf("backend 'nccl' is not available in this build (configure with CUDA and "
                  "NCCL installed)");
#endif
  }
  return errorf("unknown communication backend '{}'; expected one of: gloo, nccl", options.backend);
}

void registerGroup(int id, std::shared_ptr<CommBackend> backend) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry()[id] = std::move(backend);
}

void unregisterGroup(int id) {
  std::lock_guard<std::mutex> lock(registryMutex);
  registry().erase(id);
}

std::shared_ptr<CommBackend> findGroup(int id) {
  std::lock_guard<std::mutex> lock(registryMutex);
  auto it = registry().find(id);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<int> registeredGroups() {
  std::lock_guard<std::mutex> lock(registryMutex);
  std::vector<int> ids;
  for (const auto &entry : registry())
    ids.push_back(entry.first);
  return ids;
}

std::string exceptionMessage(const std::exception &e) {
  if (const auto *error = dynamic_cast<const c10::Error *>(&e))
    return error->what_without_backtrace();
  return e.what();
}

std::string explainCommFailure(const std::string &raw, std::chrono::milliseconds timeout) {
  std::string first = raw.substr(0, raw.find('\n'));
  std::string lower = first;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (lower.find("timeout caused pair closure") != std::string::npos)
    return fmt::format("an earlier operation timed out and closed the connection ({})", first);
  // Gloo says "Timed out ..." in its operations, "Socket Timeout" while connecting.
  if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos)
    return fmt::format("timed out after {} ms (comm_timeout_s); a peer died, never started or "
                       "did not reach the same operation ({})",
                       timeout.count(), first);
  if (first.find("closed by peer") != std::string::npos ||
      first.find("Connection reset") != std::string::npos ||
      first.find("Broken pipe") != std::string::npos)
    return fmt::format("a peer closed its connection; did it exit? ({})", first);
  return first;
}

std::vector<GroupSpec> groupSpecs(const proto::RankManifest &manifest) {
  std::vector<GroupSpec> specs;
  for (const proto::CommGroup &g : manifest.groups())
    specs.push_back(GroupSpec{g.id(), std::vector<int>(g.ranks().begin(), g.ranks().end())});
  return specs;
}

} // namespace nnsc::rt
