// GlooBackend: CommBackend over c10d::ProcessGroupGloo (CPU tensors).
//
// LibTorch 1.13's Gloo process group lacks reduce_scatter; it is emulated
// here with alltoall_base (each rank receives its slice from every peer) and
// a local reduction, which moves the same (n-1)/n of the data per rank as a
// ring reduce-scatter.
//
// LibTorch 1.13's Gloo has no bfloat16 ("Invalid scalar type"): bf16 tensors
// travel as float32 copies (Widened below). That is exact for every operation
// but a sum, which then accumulates in float32 and rounds once at the end:
// closer to the exact sum than a bfloat16 ring, and the same on every rank.
#include <cstdlib>
#include <functional>

#if defined(__linux__)
#include <sched.h>
#endif

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "Backends.h"

namespace nnsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

// One or more c10d works plus a step that runs after they all finished
// (copying or reducing a staging buffer into the caller's tensors).
class C10dWork : public Work {
public:
  C10dWork(std::vector<c10::intrusive_ptr<c10d::Work>> works, std::string context,
           std::chrono::milliseconds timeout, std::function<void()> finish)
      : Work(timeout), works_(std::move(works)), context_(std::move(context)),
        finish_(std::move(finish)) {}

  Status wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_)
      status_ = waitAll(timeout);
    done_ = true;
    return status_;
  }

private:
  Status waitAll(std::chrono::milliseconds timeout) {
    Clock::time_point deadline = Clock::now() + timeout;
    try {
      for (auto &work : works_) {
        // c10d reads a zero timeout as "wait forever": never pass it.
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        work->wait(std::max(left, std::chrono::milliseconds(1)));
      }
      if (finish_)
        finish_();
    } catch (const std::exception &e) {
      // A failed collective is the run's failure, not the input's: exit 2.
      return Status::internal(
          fmt::format("{}: {}", context_, explainCommFailure(exceptionMessage(e), timeout)));
    }
    return Status::ok();
  }

  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  std::string context_;
  std::function<void()> finish_;
  std::mutex mutex_;
  bool done_ = false;
  Status status_;
};

c10d::ReduceOp toC10d(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return c10d::ReduceOp::SUM;
  case ReduceOp::Max:
    return c10d::ReduceOp::MAX;
  case ReduceOp::Min:
    return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

bool isBf16(const at::Tensor &t) { return t.scalar_type() == at::kBFloat16; }

at::Tensor widen(const at::Tensor &t) { return isBf16(t) ? t.to(at::kFloat) : t; }

// Float32 stand-ins for the bf16 tensors of a list, and the step that writes
// their results back.
struct Widened {
  std::vector<at::Tensor> tensors;
  std::function<void()> back;

  explicit Widened(std::vector<at::Tensor> &original) {
    std::vector<std::pair<at::Tensor, at::Tensor>> pairs;
    for (at::Tensor &t : original) {
      tensors.push_back(widen(t));
      if (isBf16(t))
        pairs.emplace_back(t, tensors.back());
    }
    if (!pairs.empty())
      back = [pairs] {
        for (const auto &[to, from] : pairs)
          to.copy_(from);
      };
  }
};

bool isLoopback(const std::string &host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::shared_ptr<::gloo::transport::Device> glooDevice(const CommOptions &options,
                                                      const LaunchEnv &env) {
  if (!options.glooHostname.empty())
    return c10d::ProcessGroupGloo::createDeviceForHostname(options.glooHostname);
  if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"))
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  if (isLoopback(env.masterAddr) || env.localWorldSize == env.worldSize)
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Puts the calling thread under SCHED_BATCH for its lifetime (on Linux, when
// `on` and the thread runs under the default policy), so that the threads it
// starts inherit it; puts back the thread's own policy after. A refusal
// leaves everything as it was.
class BatchPolicyScope {
public:
  explicit BatchPolicyScope(bool on) {
#if defined(__linux__)
    if (!on)
      return;
    // Only from the default policy: the way back from SCHED_BATCH to it needs
    // no privilege (a real-time caller is left alone). old_ keeps the flag.
    old_ = sched_getscheduler(0);
    if (old_ < 0 || (old_ & ~SCHED_RESET_ON_FORK) != SCHED_OTHER ||
        sched_getparam(0, &oldParam_) != 0)
      return;
    sched_param batch{};
    set_ = sched_setscheduler(0, SCHED_BATCH, &batch) == 0;
#else
    (void)on;
#endif
  }
  ~BatchPolicyScope() {
#if defined(__linux__)
    if (set_)
      sched_setscheduler(0, old_, &oldParam_);
#endif
  }
  BatchPolicyScope(const BatchPolicyScope &) = delete;
  BatchPolicyScope &operator=(const BatchPolicyScope &) = delete;

private:
#if defined(__linux__)
  int old_ = -1;
  sched_param oldParam_{};
#endif
  bool set_ = false;
};

class GlooBackend : public CommBackend {
public:
  GlooBackend(GroupInfo group, c10::intrusive_ptr<c10d::ProcessGroupGloo> pg)
      : CommBackend(std::move(group)), pg_(std::move(pg)) {}

  std::string name() const override { return "gloo"; }
  bool carriesNatively(at::ScalarType dtype) const override { return dtype != at::kBFloat16; }

protected:
  WorkPtr doAllReduce(std::vector<at::Tensor> &original, ReduceOp op) override {
    Widened widened(original);
    std::vector<at::Tensor> &tensors = widened.tensors;
    return launch(
        "allreduce",
        [&] {
          // c10d treats a list as replicas of one tensor; reduce each separately
          // (coalesced into one buffer when they share a dtype).
          if (tensors.size() > 1 && sameDtype(tensors)) {
            c10d::AllreduceCoalescedOptions opts;
            opts.reduceOp = toC10d(op);
            opts.timeout = group().timeout;
            return std::vector{pg_->allreduce_coalesced(tensors, opts)};
          }
          std::vector<c10::intrusive_ptr<c10d::Work>> works;
          for (at::Tensor &t : tensors) {
            std::vector<at::Tensor> one{t};
            c10d::AllreduceOptions opts;
            opts.reduceOp = toC10d(op);
            opts.timeout = group().timeout;
            works.push_back(pg_->allreduce(one, opts));
          }
          return works;
        },
        widened.back);
  }

  WorkPtr doAllGather(const at::Tensor &input, std::vector<at::Tensor> &original) override {
    Widened outputs(original);
    return launch(
        "allgather",
        [&] {
          std::vector<std::vector<at::Tensor>> out{outputs.tensors};
          std::vector<at::Tensor> in{widen(input).contiguous()};
          c10d::AllgatherOptions opts;
          opts.timeout = group().timeout;
          return std::vector{pg_->allgather(out, in, opts)};
        },
        outputs.back);
  }

  WorkPtr doReduceScatter(const std::vector<at::Tensor> &inputs, at::Tensor &output,
                          ReduceOp op) override {
    at::Tensor send = widen(at::stack(inputs));
    at::Tensor received = at::empty_like(send);
    auto finish = [received, output, op]() mutable {
      if (op == ReduceOp::Sum)
        output.copy_(received.sum(0));
      else
        output.copy_(op == ReduceOp::Max ? received.amax(0) : received.amin(0));
    };
    return launch(
        "reducescatter",
        [&] {
          std::vector<int64_t> equal;
          c10d::AllToAllOptions opts;
          opts.timeout = group().timeout;
          return std::vector{pg_->alltoall_base(received, send, equal, equal, opts)};
        },
        finish);
  }

  WorkPtr doAllToAll(const at::Tensor &input, at::Tensor &original) override {
    std::vector<at::Tensor> list{original};
    Widened output(list);
    return launch(
        "alltoall",
        [&] {
          std::vector<int64_t> equal;
          at::Tensor in = widen(input);
          c10d::AllToAllOptions opts;
          opts.timeout = group().timeout;
          return std::vector{pg_->alltoall_base(output.tensors[0], in, equal, equal, opts)};
        },
        output.back);
  }

  WorkPtr doBroadcast(std::vector<at::Tensor> &original, int root) override {
    Widened widened(original);
    std::vector<at::Tensor> &tensors = widened.tensors;
    return launch(
        "broadcast",
        [&] {
          std::vector<c10::intrusive_ptr<c10d::Work>> works;
          for (at::Tensor &t : tensors) {
            std::vector<at::Tensor> one{t};
            c10d::BroadcastOptions opts;
            opts.rootRank = root;
            opts.timeout = group().timeout;
            works.push_back(pg_->broadcast(one, opts));
          }
          return works;
        },
        widened.back);
  }

  WorkPtr doSend(const at::Tensor &tensor, int dst, int tag) override {
    return launch("send", [&] {
      std::vector<at::Tensor> one{widen(tensor)};
      return std::vector{pg_->send(one, dst, tag)};
    });
  }

  WorkPtr doRecv(at::Tensor &original, int src, int tag) override {
    std::vector<at::Tensor> list{original};
    Widened tensor(list);
    return launch(
        "recv",
        [&] {
          std::vector<at::Tensor> one{tensor.tensors[0]};
          return std::vector{pg_->recv(one, src, tag)};
        },
        tensor.back);
  }

  WorkPtr doBarrier() override {
    return launch("barrier", [&] {
      c10d::BarrierOptions opts;
      opts.timeout = group().timeout;
      return std::vector{pg_->barrier(opts)};
    });
  }

private:
  static bool sameDtype(const std::vector<at::Tensor> &tensors) {
    for (const at::Tensor &t : tensors)
      if (t.scalar_type() != tensors[0].scalar_type() || !t.is_contiguous())
        return false;
    return true;
  }

  // Starts c10d works; a synchronous throw (bad dtype, closed connection)
  // becomes a finished, failed Work.
  template <typename Start>
  WorkPtr launch(const char *op, Start start, std::function<void()> finish = {}) {
    try {
      return std::make_shared<C10dWork>(start(), context(op), group().timeout, std::move(finish));
    } catch (const std::exception &e) {
      return Work::finished(Status::internal(fmt::format(
          "{}: {}", context(op), explainCommFailure(exceptionMessage(e), group().timeout))));
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

} // namespace

Expected<std::shared_ptr<CommBackend>>
createGlooBackend(const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
                  const std::string &prefix, const CommOptions &options, const LaunchEnv &env) {
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = group.timeout;
    opts->threads = std::max(1, options.glooThreads);
    // The device starts Gloo's I/O thread: under the caller's policy.
    opts->devices.push_back(glooDevice(options, env));
    // The group starts its worker threads, which inherit this thread's policy.
    BatchPolicyScope batch(options.glooBatchWorkers);
    // Connects to every peer of the group through the store: collective.
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(prefix, store), group.rank,
        static_cast<int>(group.ranks.size()), opts);
    return std::shared_ptr<CommBackend>(std::make_shared<GlooBackend>(group, std::move(pg)));
  } catch (const std::exception &e) {
    return Status::internal(fmt::format("cannot create the gloo context of {} at rank {}: {}",
                                        group.describe(), group.rank,
                                        explainCommFailure(exceptionMessage(e), group.timeout)));
  }
}

} // namespace nnsc::rt
