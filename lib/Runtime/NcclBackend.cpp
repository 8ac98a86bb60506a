// NcclBackend: CommBackend over NCCL's C API for CUDA tensors. Compiled only
// when CMake finds CUDA and NCCL (NNSC_HAVE_NCCL).
//
// Streams: PyTorch queues kernels on the legacy default stream unless told
// otherwise, so each operation makes the communicator's own stream wait for
// an event recorded there, and records its own completion on that stream.
// Work::wait of a data operation makes the legacy stream wait for that event
// and returns at once: the kernels that use the result run after it, and the
// host never waits for a collective inside a step (a host read of a result,
// .cpu() or .item(), waits for the stream as usual). A barrier's wait blocks
// the host, since its callers order host actions (files) with it.
//
// Failures: the communicator is non-blocking, so init polls with a deadline.
// A watchdog thread per communicator polls the unfinished operations; one
// past its deadline (counted from when the communicator's stream reaches it,
// not from when the host queued it), or an asynchronous NCCL error, aborts
// the communicator (its kernels return, so nothing waits forever, neither the
// GPU nor a host read behind it) and the failure, naming the operation, is
// returned by the communicator's next operation and by every wait.
#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "Backends.h"

namespace nnsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

Expected<ncclDataType_t> ncclType(at::ScalarType t) {
  switch (t) {
  case at::kFloat:
    return ncclFloat32;
  case at::kDouble:
    return ncclFloat64;
  case at::kHalf:
    return ncclFloat16;
  case at::kBFloat16:
    return ncclBfloat16;
  case at::kInt:
    return ncclInt32;
  case at::kLong:
    return ncclInt64;
  case at::kChar:
    return ncclInt8;
  case at::kByte:
  case at::kBool:
    return ncclUint8;
  default:
    return errorf("backend 'nccl' does not support dtype {}", c10::toString(t));
  }
}

ncclRedOp_t ncclOp(ReduceOp op) {
  return op == ReduceOp::Max ? ncclMax : op == ReduceOp::Min ? ncclMin : ncclSum;
}

Status cudaStatus(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return Status::ok();
  return errorf("{} failed: {}", what, cudaGetErrorString(e));
}

// cudaEventQuery, with "not ready" taken back from the thread's last error:
// the runtime may keep it there, and PyTorch checks cudaGetLastError after
// every kernel launch, so the next kernel of this thread would fail with
// "device not ready" (PyTorch's own event polls clear it the same way).
cudaError_t queryEvent(cudaEvent_t event) {
  cudaError_t e = cudaEventQuery(event);
  if (e == cudaErrorNotReady)
    (void)cudaGetLastError();
  return e;
}

std::string timeoutText(std::chrono::milliseconds timeout) {
  return fmt::format("timed out after {} ms; a peer died or did not reach the same operation",
                     timeout.count());
}

// One issued operation: its start and completion events on the
// communicator's stream (destroyed with the last owner, the work or the
// watchdog), its timeout and what it was. The timeout counts from the start:
// the stream reaches the operation only after the kernels queued before it
// (a host far ahead of a busy GPU is not a late peer).
struct Issued {
  cudaEvent_t started = nullptr;
  cudaEvent_t done = nullptr;
  std::chrono::milliseconds timeout{0};
  std::string context;
  std::optional<Clock::time_point> deadline; ///< set once `started` is seen

  // The deadline, once the operation has started; none while it waits its turn.
  std::optional<Clock::time_point> deadlineNow() {
    if (!deadline && queryEvent(started) != cudaErrorNotReady)
      deadline = Clock::now() + timeout;
    return deadline;
  }

  ~Issued() {
    if (started)
      cudaEventDestroy(started);
    if (done)
      cudaEventDestroy(done);
  }
};

// The communicator, the stream its operations run on and their watchdog;
// shared by the backend and its works so a work outlives neither.
struct NcclComm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  // From the caching allocator: its release at teardown does not wait for the
  // device, as cudaFree would (behind another communicator's stuck kernels).
  at::Tensor barrierBuffer;
  bool aborted = false;
  Status failure; ///< why it was aborted
  std::mutex mutex;

  // An operation still unfinished here (the run failed and a peer left
  // without its side) would keep ncclCommDestroy waiting for ever: such a
  // communicator is aborted instead, so a failed run's teardown ends and its
  // error is printed.
  ~NcclComm() {
    bool unfinished = stopWatchdog();
    cudaSetDevice(device);
    if (comm)
      (aborted || unfinished) ? ncclCommAbort(comm) : ncclCommDestroy(comm);
    if (stream)
      cudaStreamDestroy(stream);
  }

  // Polls the communicator until pending work is enqueued (non-blocking
  // mode), aborting it after `deadline`. Called with `mutex` held.
  Status settle(Clock::time_point deadline, std::chrono::milliseconds timeout) {
    ncclResult_t state = ncclInProgress;
    while (true) {
      ncclCommGetAsyncError(comm, &state);
      if (state != ncclInProgress)
        break;
      if (Clock::now() > deadline)
        return abort(timeoutText(timeout));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (state != ncclSuccess)
      return abort(fmt::format("{} ({})", ncclGetErrorString(state), ncclGetLastError(comm)));
    return Status::ok();
  }

  // Called with `mutex` held. The first failure is the one kept.
  Status abort(const std::string &why) {
    if (!aborted) {
      ncclCommAbort(comm);
      aborted = true;
      comm = nullptr;
      failure = Status::internal(why); // the run's failure, not the input's: exit 2
    }
    return failure;
  }

  Status check() {
    std::lock_guard<std::mutex> lock(mutex);
    return aborted ? failure : Status::ok();
  }

  void watch(std::shared_ptr<Issued> op) {
    std::lock_guard<std::mutex> lock(watchMutex_);
    if (!watchdog_.joinable())
      watchdog_ = std::thread([this] { watchLoop(); });
    watched_.push_back(std::move(op));
  }

private:
  // Stops the watchdog; true when a watched operation has not finished.
  bool stopWatchdog() {
    {
      std::lock_guard<std::mutex> lock(watchMutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable())
      watchdog_.join();
    cudaSetDevice(device);
    for (const auto &op : watched_)
      if (queryEvent(op->done) == cudaErrorNotReady)
        return true;
    return false;
  }

  // Every 2 ms: drops the finished operations; aborts on a late one or an
  // asynchronous error. Operations finish in issue order on the one stream,
  // so the oldest unfinished one is the one to time (from its start: only
  // this thread reads or sets an Issued's deadline).
  void watchLoop() {
    cudaSetDevice(device); // the thread's events and communicator are there
    std::unique_lock<std::mutex> lock(watchMutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(2));
      while (!watched_.empty()) {
        cudaError_t e = queryEvent(watched_.front()->done);
        if (e == cudaErrorNotReady)
          break;
        watched_.pop_front(); // done, or an error the host will see on its own
      }
      if (watched_.empty())
        continue;
      Issued &oldest = *watched_.front();
      std::string why;
      {
        std::lock_guard<std::mutex> commLock(mutex);
        if (aborted) {
          watched_.clear(); // its kernels return: nothing left to time
          continue;
        }
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm, &state);
        if (state != ncclSuccess && state != ncclInProgress)
          why = fmt::format("{} ({})", ncclGetErrorString(state), ncclGetLastError(comm));
        else if (auto deadline = oldest.deadlineNow(); deadline && Clock::now() > *deadline)
          why = timeoutText(oldest.timeout);
        if (!why.empty())
          (void)abort(fmt::format("{}: {}", oldest.context, why));
      }
      if (!why.empty())
        watched_.clear();
    }
  }

  std::mutex watchMutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Issued>> watched_;
  std::thread watchdog_;
  bool stopping_ = false;
};

class NcclWork : public Work {
public:
  NcclWork(std::shared_ptr<NcclComm> comm, std::shared_ptr<Issued> issued, bool blocking,
           std::vector<at::Tensor> keep, std::function<void()> finish)
      : Work(issued->timeout), comm_(std::move(comm)), issued_(std::move(issued)),
        blocking_(blocking), keep_(std::move(keep)), finish_(std::move(finish)) {}

  // A work dropped unwaited still orders the legacy stream after it before
  // its tensors go back to the caching allocator.
  ~NcclWork() override {
    if (!finished_ && !keep_.empty())
      cudaStreamWaitEvent(cudaStreamLegacy, issued_->done, 0);
  }

  Status wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!finished_)
      status_ = (blocking_ ? block(timeout) : order()).withContext(issued_->context);
    finished_ = true;
    keep_.clear();
    return status_;
  }

private:
  // The kernels queued after this wait on the legacy stream run after the
  // operation; the result's copies back (finish_) are such kernels.
  Status order() {
    NNSC_RETURN_IF_ERROR(comm_->check());
    NNSC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(comm_->device), "cudaSetDevice"));
    NNSC_RETURN_IF_ERROR(cudaStatus(cudaStreamWaitEvent(cudaStreamLegacy, issued_->done, 0),
                                    "cudaStreamWaitEvent"));
    if (finish_)
      finish_();
    return Status::ok();
  }

  // The host waits for the operation (the watchdog aborts a late one); its
  // `timeout` counts from the operation's start, as the watchdog's does.
  Status block(std::chrono::milliseconds timeout) {
    Clock::time_point deadline = Clock::now() + timeout;
    while (true) {
      cudaError_t e = queryEvent(issued_->done);
      if (e == cudaSuccess)
        break;
      if (e != cudaErrorNotReady)
        return cudaStatus(e, "cudaEventQuery");
      NNSC_RETURN_IF_ERROR(comm_->check());
      if (queryEvent(issued_->started) == cudaErrorNotReady)
        deadline = Clock::now() + timeout; // still behind the work queued before it
      else if (Clock::now() > deadline) {
        std::lock_guard<std::mutex> lock(comm_->mutex);
        return comm_->abort(timeoutText(timeout));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // Finished, unless an abort made its kernels return early.
    NNSC_RETURN_IF_ERROR(comm_->check());
    if (finish_)
      finish_();
    return Status::ok();
  }

  std::shared_ptr<NcclComm> comm_;
  std::shared_ptr<Issued> issued_;
  bool blocking_;
  std::vector<at::Tensor> keep_;
  std::function<void()> finish_;
  std::mutex mutex_;
  bool finished_ = false;
  Status status_;
};

Status initComm(NcclComm &c, const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
                const std::string &prefix) {
  NNSC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(c.device), "cudaSetDevice"));
  // Rank 0 of the group makes the id; the others read it (waiting up to the
  // store's timeout).
  ncclUniqueId id;
  c10d::PrefixStore ids(prefix, store);
  try {
    if (group.rank == 0) {
      if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
        return errorf("ncclGetUniqueId failed: {}", ncclGetErrorString(r));
      const auto *bytes = reinterpret_cast<const uint8_t *>(&id);
      ids.set("nccl_unique_id", std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    } else {
      std::vector<uint8_t> bytes = ids.get("nccl_unique_id");
      if (bytes.size() != sizeof(id))
        return errorf("the NCCL unique id in the store has {} bytes, expected {}", bytes.size(),
                      sizeof(id));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
  } catch (const std::exception &e) {
    return errorf("exchanging the NCCL unique id: {}", exceptionMessage(e));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&c.comm, static_cast<int>(group.ranks.size()), id,
                                          group.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return errorf("ncclCommInitRankConfig failed: {}", ncclGetErrorString(r));
  NNSC_RETURN_IF_ERROR(c.settle(Clock::now() + group.timeout, group.timeout));
  NNSC_RETURN_IF_ERROR(cudaStatus(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
                                  "cudaStreamCreateWithFlags"));
  try {
    c.barrierBuffer =
        at::zeros({1}, at::TensorOptions()
                           .dtype(at::kFloat)
                           .device(at::kCUDA, static_cast<c10::DeviceIndex>(c.device)));
  } catch (const std::exception &e) {
    return errorf("allocating the barrier's buffer on cuda:{}: {}", c.device, exceptionMessage(e));
  }
  return Status::ok();
}

// NCCL reads and writes the tensors on the communicator's own device.
Status checkCuda(const std::vector<at::Tensor> &tensors, int device) {
  for (const at::Tensor &t : tensors) {
    if (!t.is_cuda())
      return errorf("backend 'nccl' needs CUDA tensors; got a tensor on {}", t.device().str());
    if (t.get_device() != device)
      return errorf("backend 'nccl' on cuda:{} got a tensor on {}", device, t.device().str());
    if (!ncclType(t.scalar_type()))
      return ncclType(t.scalar_type()).status();
  }
  return Status::ok();
}

class NcclBackend : public CommBackend {
public:
  NcclBackend(GroupInfo group, std::shared_ptr<NcclComm> comm)
      : CommBackend(std::move(group)), comm_(std::move(comm)) {}

  std::string name() const override { return "nccl"; }

protected:
  WorkPtr doAllReduce(std::vector<at::Tensor> &tensors, ReduceOp op) override {
    std::vector<at::Tensor> dense;
    for (const at::Tensor &t : tensors)
      dense.push_back(t.contiguous());
    auto finish = [tensors, dense]() mutable {
      for (size_t i = 0; i < tensors.size(); ++i)
        if (!tensors[i].is_same(dense[i]))
          tensors[i].copy_(dense[i]);
    };
    return enqueue(
        "allreduce", dense,
        [&](ncclComm_t c, cudaStream_t s) {
          for (at::Tensor &t : dense)
            if (ncclResult_t r = ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(),
                                               *ncclType(t.scalar_type()), ncclOp(op), c, s);
                r != ncclSuccess && r != ncclInProgress)
              return r;
          return ncclSuccess;
        },
        finish);
  }

  // Outputs back to back (a flat's split: ZeRO's gathers) are written
  // straight, no staging buffer and no copy after; in place where the input
  // is this rank's output (NCCL allows exactly that overlap).
  WorkPtr doAllGather(const at::Tensor &input, std::vector<at::Tensor> &outputs) override {
    at::Tensor in = input.contiguous();
    at::Tensor flat;
    if (allGatherDirect(in, outputs, rank(), flat))
      return enqueue("allgather", {in, flat}, [&](ncclComm_t c, cudaStream_t s) {
        return ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(),
                             *ncclType(in.scalar_type()), c, s);
      });
    at::Tensor staging = at::empty({size(), in.numel()}, in.options());
    auto finish = [outputs, staging]() mutable {
      for (size_t i = 0; i < outputs.size(); ++i)
        outputs[i].copy_(staging[i].view(outputs[i].sizes()));
    };
    return enqueue(
        "allgather", {in, staging},
        [&](ncclComm_t c, cudaStream_t s) {
          return ncclAllGather(in.data_ptr(), staging.data_ptr(), in.numel(),
                               *ncclType(in.scalar_type()), c, s);
        },
        finish);
  }

  // Inputs back to back (a bucket's split) are sent as they lie, and a
  // contiguous output is written straight unless it overlaps them other than
  // as this rank's input (NCCL's in-place form).
  WorkPtr doReduceScatter(const std::vector<at::Tensor> &inputs, at::Tensor &output,
                          ReduceOp op) override {
    at::Tensor staging = backToBack(inputs);
    if (!staging.defined()) // dense whatever the inputs' layout (stack may keep channels-last)
      staging = at::stack(inputs).contiguous();
    const bool direct = reduceScatterDirect(staging, inputs, output, rank());
    at::Tensor out = direct ? output : at::empty_like(output, at::MemoryFormat::Contiguous);
    std::function<void()> finish;
    if (!direct)
      finish = [output, out]() mutable { output.copy_(out); };
    return enqueue(
        "reducescatter", {staging, out},
        [&](ncclComm_t c, cudaStream_t s) {
          return ncclReduceScatter(staging.data_ptr(), out.data_ptr(), out.numel(),
                                   *ncclType(out.scalar_type()), ncclOp(op), c, s);
        },
        finish);
  }

  WorkPtr doAllToAll(const at::Tensor &input, at::Tensor &output) override {
    size_t count = input.numel() / size(), bytes = count * input.element_size();
    return enqueue("alltoall", {input, output}, [&](ncclComm_t c, cudaStream_t s) {
      auto *send = static_cast<char *>(input.data_ptr());
      auto *recv = static_cast<char *>(output.data_ptr());
      ncclDataType_t type = *ncclType(input.scalar_type());
      for (int peer = 0; peer < size(); ++peer) {
        ncclResult_t r = ncclSend(send + peer * bytes, count, type, peer, c, s);
        if (r == ncclSuccess || r == ncclInProgress)
          r = ncclRecv(recv + peer * bytes, count, type, peer, c, s);
        if (r != ncclSuccess && r != ncclInProgress)
          return r;
      }
      return ncclSuccess;
    });
  }

  WorkPtr doBroadcast(std::vector<at::Tensor> &tensors, int root) override {
    for (const at::Tensor &t : tensors)
      if (!t.is_contiguous())
        return Work::finished(errorf("{}: tensors must be contiguous", context("broadcast")));
    return enqueue("broadcast", tensors, [&](ncclComm_t c, cudaStream_t s) {
      for (at::Tensor &t : tensors)
        if (ncclResult_t r = ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(),
                                           *ncclType(t.scalar_type()), root, c, s);
            r != ncclSuccess && r != ncclInProgress)
          return r;
      return ncclSuccess;
    });
  }

  WorkPtr doSend(const at::Tensor &tensor, int dst, int) override {
    return enqueue("send", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
      return ncclSend(tensor.data_ptr(), tensor.numel(), *ncclType(tensor.scalar_type()), dst, c,
                      s);
    });
  }

  WorkPtr doRecv(at::Tensor &tensor, int src, int) override {
    return enqueue("recv", {tensor}, [&](ncclComm_t c, cudaStream_t s) {
      return ncclRecv(tensor.data_ptr(), tensor.numel(), *ncclType(tensor.scalar_type()), src, c,
                      s);
    });
  }

  WorkPtr doBarrier() override {
    return enqueue(
        "barrier", {},
        [&](ncclComm_t c, cudaStream_t s) {
          void *buffer = comm_->barrierBuffer.data_ptr();
          return ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, c, s);
        },
        {}, /*blocking=*/true);
  }

private:
  using Calls = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

  // Orders the calls after the work queued on the legacy default stream,
  // issues them as one NCCL group, records their completion and hands it to
  // the watchdog. `blocking`: the work's wait blocks the host (barriers).
  WorkPtr enqueue(const char *op, std::vector<at::Tensor> tensors, const Calls &calls,
                  std::function<void()> finish = {}, bool blocking = false) {
    RECORD_USER_SCOPE(std::string("nccl:") + op); // a profile's phase, as c10d's gloo:* ones
    auto issued = std::make_shared<Issued>();
    issued->timeout = group().timeout;
    issued->context = context(op);
    Status s = checkCuda(tensors, comm_->device);
    cudaEvent_t ready = nullptr;
    if (s) {
      std::lock_guard<std::mutex> lock(comm_->mutex);
      s = issue(calls, ready, *issued);
    }
    if (ready)
      cudaEventDestroy(ready);
    if (!s)
      return Work::finished(s.withContext(issued->context));
    comm_->watch(issued);
    return std::make_shared<NcclWork>(comm_, std::move(issued), blocking, std::move(tensors),
                                      std::move(finish));
  }

  Status issue(const Calls &calls, cudaEvent_t &ready, Issued &issued) {
    if (comm_->aborted)
      return comm_->failure.withContext("the communicator was aborted by an earlier failure");
    NNSC_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(comm_->device), "cudaSetDevice"));
    NNSC_RETURN_IF_ERROR(
        cudaStatus(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate"));
    for (cudaEvent_t *e : {&issued.started, &issued.done})
      NNSC_RETURN_IF_ERROR(
          cudaStatus(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "cudaEventCreate"));
    NNSC_RETURN_IF_ERROR(cudaStatus(cudaEventRecord(ready, cudaStreamLegacy), "cudaEventRecord"));
    NNSC_RETURN_IF_ERROR(
        cudaStatus(cudaStreamWaitEvent(comm_->stream, ready, 0), "cudaStreamWaitEvent"));
    NNSC_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(issued.started, comm_->stream), "cudaEventRecord"));
    ncclGroupStart();
    ncclResult_t r = calls(comm_->comm, comm_->stream);
    ncclResult_t end = ncclGroupEnd();
    if (r == ncclSuccess || r == ncclInProgress)
      r = end;
    if (r != ncclSuccess && r != ncclInProgress)
      return comm_->abort(
          fmt::format("{} ({})", ncclGetErrorString(r), ncclGetLastError(comm_->comm)));
    NNSC_RETURN_IF_ERROR(comm_->settle(Clock::now() + group().timeout, group().timeout));
    return cudaStatus(cudaEventRecord(issued.done, comm_->stream), "cudaEventRecord");
  }

  std::shared_ptr<NcclComm> comm_;
};

} // namespace

Expected<std::shared_ptr<CommBackend>>
createNcclBackend(const GroupInfo &group, const c10::intrusive_ptr<c10d::Store> &store,
                  const std::string &prefix, const CommOptions &options, const LaunchEnv &env) {
  auto comm = std::make_shared<NcclComm>();
  comm->device = options.cudaDevice >= 0 ? options.cudaDevice : env.localRank;
  Status s = initComm(*comm, group, store, prefix);
  if (!s)
    return s.withContext(fmt::format("cannot create nccl {} at rank {} on cuda:{}",
                                     group.describe(), group.rank, comm->device));
  return std::shared_ptr<CommBackend>(std::make_shared<NcclBackend>(group, std::move(comm)));
}

} // namespace nnsc::rt
