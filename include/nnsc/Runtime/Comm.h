#pragma once
/// Communication: backends behind one interface (Gloo for CPU tensors, NCCL
/// for CUDA tensors), asynchronous work handles, a process-global registry of
/// groups that the nnsc.* TorchScript ops read, and CommWorld, which does the
/// rendezvous and creates the groups of a rank manifest.
///
/// Every operation is collective over its group: all members must issue the
/// same operations in the same order. Ranks passed to a backend are ranks in
/// its group (0..size-1), not global ranks.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Support/Status.h"

namespace nnsc::proto {
class RankManifest;
}

namespace nnsc::rt {

/// The default time an operation, rendezvous included, may take before it
/// fails (a dead or stuck peer gives an error, never a hang).
constexpr std::chrono::milliseconds kDefaultCommTimeout{60000};

/// The registry id of the group of all ranks; manifest groups use ids >= 0.
constexpr int kWorldGroup = -1;
/// The id of a pipeline channel's group (CommWorld::createChannel).
constexpr int kPipelineChannelGroup = -2;

enum class ReduceOp { Sum, Max, Min };

/// An operation in flight. Its tensors must not be read or written until
/// wait() returns ok.
class Work {
public:
  explicit Work(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  virtual ~Work() = default;
  /// Blocks until the operation finishes or `timeout` passes; the error
  /// names the backend, the group, this rank and the operation.
  virtual Status wait(std::chrono::milliseconds timeout) = 0;
  /// wait() with the group's timeout.
  Status wait() { return wait(timeout_); }
  /// Work that has already finished with `status`.
  static std::shared_ptr<Work> finished(Status status);

private:
  std::chrono::milliseconds timeout_;
};
using WorkPtr = std::shared_ptr<Work>;

/// `parts` as one flat 1-D tensor over their elements when they lie back to
/// back in one storage, each contiguous, non-empty and of one dtype (as a
/// flat's split() leaves them), so that a collective can use their memory as
/// one buffer; an undefined tensor otherwise (and for no parts).
at::Tensor backToBack(const std::vector<at::Tensor> &parts);
/// Whether the elements of `a` and `b` may share memory: their byte ranges
/// intersect (true for a tensor that is not contiguous).
bool overlaps(const at::Tensor &a, const at::Tensor &b);
/// Whether an all-gather of `in` (contiguous) into `outputs` (equal pieces,
/// this rank's at `rank`) may write them directly: they lie back to back
/// (`flat` set to their span) and `in` lies apart from them or is exactly
/// this rank's piece (the in-place form NCCL allows); else it is staged.
bool allGatherDirect(const at::Tensor &in, const std::vector<at::Tensor> &outputs, int rank,
                     at::Tensor &flat);
/// Whether a reduce-scatter that sends `sent` (the inputs' elements, back to
/// back: `inputs` themselves or a copy) may write `output` directly: it is
/// contiguous and lies apart from `sent` or is exactly this rank's input
/// (NCCL's in-place form); else it is staged.
bool reduceScatterDirect(const at::Tensor &sent, const std::vector<at::Tensor> &inputs,
                         const at::Tensor &output, int rank);

/// Which ranks a backend connects and how this process sits among them.
struct GroupInfo {
  int id = kWorldGroup;
  std::vector<int> ranks; ///< global ranks, ascending
  int rank = 0;           ///< this process's index in `ranks`
  std::chrono::milliseconds timeout = kDefaultCommTimeout;

  /// "group 3 (global ranks 0,2)" or "the world group (4 ranks)".
  std::string describe() const;
};

/// A communicator over one group. Public operations check their arguments
/// and then call the backend's implementation; an operation the backend
/// lacks fails with "backend 'gloo' does not support alltoall". Failures are
/// reported through the returned Work (never thrown).
class CommBackend {
public:
  explicit CommBackend(GroupInfo group) : group_(std::move(group)) {}
  virtual ~CommBackend() = default;
  CommBackend(const CommBackend &) = delete;
  CommBackend &operator=(const CommBackend &) = delete;

  /// "gloo" or "nccl".
  virtual std::string name() const = 0;
  /// False when the backend sends tensors of `dtype` as wider copies (Gloo's
  /// bfloat16 travels as float32): gathering such a tensor saves no bytes
  /// and costs the copies.
  virtual bool carriesNatively(at::ScalarType) const { return true; }
  int rank() const { return group_.rank; }
  int size() const { return static_cast<int>(group_.ranks.size()); }
  const GroupInfo &group() const { return group_; }

  /// Reduces each tensor over the group in place.
  WorkPtr allReduce(std::vector<at::Tensor> &tensors, ReduceOp op = ReduceOp::Sum);
  /// Fills outputs[i] with rank i's `input`; needs size() outputs shaped like
  /// `input` (same dtype and device).
  WorkPtr allGather(const at::Tensor &input, std::vector<at::Tensor> &outputs);
  /// `output` = reduction over ranks of their inputs[rank()]; needs size()
  /// inputs shaped like `output`.
  WorkPtr reduceScatter(const std::vector<at::Tensor> &inputs, at::Tensor &output,
                        ReduceOp op = ReduceOp::Sum);
  /// Equal splits along dim 0: slice j of `input` goes to rank j, slice i of
  /// `output` comes from rank i. Both contiguous, same shape, dim 0 divisible
  /// by size().
  WorkPtr allToAll(const at::Tensor &input, at::Tensor &output);
  /// Copies group rank `root`'s tensors into everyone's, in place.
  WorkPtr broadcast(std::vector<at::Tensor> &tensors, int root);
  /// Point to point: `tensor` must be contiguous; `tag` matches a send with
  /// its recv (backends without tags ignore it).
  WorkPtr send(const at::Tensor &tensor, int dst, int tag = 0);
  WorkPtr recv(at::Tensor &tensor, int src, int tag = 0);
  /// Returns when every member has entered the barrier.
  WorkPtr barrier();

protected:
  virtual WorkPtr doAllReduce(std::vector<at::Tensor> &tensors, ReduceOp op);
  virtual WorkPtr doAllGather(const at::Tensor &input, std::vector<at::Tensor> &outputs);
  virtual WorkPtr doReduceScatter(const std::vector<at::Tensor> &inputs, at::Tensor &output,
                                  ReduceOp op);
  virtual WorkPtr doAllToAll(const at::Tensor &input, at::Tensor &output);
  virtual WorkPtr doBroadcast(std::vector<at::Tensor> &tensors, int root);
  virtual WorkPtr doSend(const at::Tensor &tensor, int dst, int tag);
  virtual WorkPtr doRecv(at::Tensor &tensor, int src, int tag);
  virtual WorkPtr doBarrier();

  /// A finished Work failing with "backend '<name>' does not support <op>".
  WorkPtr unsupported(const char *op) const;
  /// Prefix for errors: "gloo allreduce on group 3 (global ranks 0,2), rank 1".
  std::string context(const char *op) const;

private:
  WorkPtr invalid(const char *op, const Status &why) const;
  GroupInfo group_;
};

/// How CommWorld connects the ranks.
struct CommOptions {
  std::string backend = "gloo"; ///< "gloo" or "nccl"
  std::chrono::milliseconds timeout = kDefaultCommTimeout;
  /// Gloo: the address to bind; empty picks 127.0.0.1 when the master is on
  /// loopback, else the interface in GLOO_SOCKET_IFNAME, else this host's name.
  std::string glooHostname;
  int glooThreads = 2; ///< worker threads per Gloo group
  /// Gloo: start the group's worker threads under Linux's SCHED_BATCH, which
  /// never preempts the thread that wakes it. Gloo's I/O thread wakes a
  /// worker while it still holds the worker's buffer, and the worker's
  /// destructor of that buffer spins with sched_yield until it is let go; a
  /// worker that preempted the I/O thread on the same CPU spun until the next
  /// scheduler tick (4 ms at 250 Hz): the all-reduces inside a Llama step took
  /// 2-3 ms after both ranks arrived instead of 0.7 (perf sched, gdb). The
  /// I/O thread and the caller keep their policy.
  bool glooBatchWorkers = true;
  int cudaDevice = -1; ///< NCCL: the device to use; -1 means the local rank
};

/// Creates a backend of kind `options.backend` for `group`, rendezvousing
/// through `store` under `prefix` (all members call it). "backend 'nccl' is
/// not available in this build" when NCCL was not compiled in.
Expected<std::shared_ptr<CommBackend>>
createBackend(const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
              const std::string &prefix, const CommOptions &options, const LaunchEnv &env);

/// Registry read by the nnsc.* ops: group id -> backend. Thread safe.
void registerGroup(int id, std::shared_ptr<CommBackend> backend);
void unregisterGroup(int id);
/// nullptr when no group `id` is registered.
std::shared_ptr<CommBackend> findGroup(int id);
/// The ids registered, ascending (for messages).
std::vector<int> registeredGroups();

/// A group of a rank manifest.
struct GroupSpec {
  int id = 0;
  std::vector<int> ranks; ///< global ranks, ascending
};

/// The groups listed in a rank manifest.
std::vector<GroupSpec> groupSpecs(const proto::RankManifest &manifest);

/// The job's communication: the rendezvous store, the world group and the
/// sub-groups, each registered for the nnsc ops while the world lives.
class CommWorld {
public:
  /// Connects to the rendezvous store (rank 0 hosts it at
  /// env.masterAddr:env.masterPort unless env.useAgentStore) and creates the
  /// world group, registered as kWorldGroup. Fails after options.timeout if a
  /// rank does not show up.
  static Expected<std::unique_ptr<CommWorld>> create(const LaunchEnv &env,
                                                     const CommOptions &options = {});
  ~CommWorld();

  /// Creates and registers a backend for each group this rank belongs to, in
  /// ascending id order. Every rank must pass the groups it belongs to with
  /// the same ids and ranks; a group without this rank is skipped.
  Status addGroups(const std::vector<GroupSpec> &groups);

  const LaunchEnv &env() const { return env_; }
  int rank() const { return env_.rank; }
  int size() const { return env_.worldSize; }
  CommBackend &world() { return *world_; }
  /// nullptr if this rank is not in group `id` (or it was never added).
  std::shared_ptr<CommBackend> group(int id) const;
  /// A backend of its own over `ranks` (ascending, this rank among them),
  /// rendezvousing under `prefix`, not registered for the nnsc ops: a
  /// pipeline channel (PipelineManifest.h PipeChannel). All its ranks call it.
  Expected<std::shared_ptr<CommBackend>> createChannel(const std::vector<int> &ranks,
                                                       const std::string &prefix);
  /// The store every rank shares, for small coordination values.
  const c10::intrusive_ptr<c10d::Store> &store() const { return store_; }

private:
  CommWorld(LaunchEnv env, CommOptions options, c10::intrusive_ptr<c10d::Store> store);
  Status addGroup(const GroupSpec &spec);

  LaunchEnv env_;
  CommOptions options_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<CommBackend> world_;
  std::map<int, std::shared_ptr<CommBackend>> groups_;
};

} // namespace nnsc::rt
