#include "nnsc/Runtime/Reducer.h"

#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace nnsc::rt {

Reducer::Reducer(std::shared_ptr<CommBackend> group, std::vector<at::Tensor> params,
                 std::vector<std::string> names, int64_t bucketBytes, bool average,
                 std::chrono::milliseconds timeout, int64_t divisor, bool scatter, bool shardGrads,
                 std::shared_ptr<CommBackend> cross, std::vector<int> units)
    : group_(std::move(group)), cross_(scatter ? std::move(cross) : nullptr),
      params_(std::move(params)), names_(std::move(names)),
      units_(units.size() == params_.size() ? std::move(units) : std::vector<int>()),
      divisor_(divisor > 0 ? divisor
               : average   ? int64_t(group_->size()) * (cross_ ? cross_->size() : 1)
                           : 1),
      timeout_(timeout), scatter_(scatter), bucketOf_(params_.size()), seen_(params_.size(), false),
      armed_(params_.size(), false) {
  shardGrads_ = shardGrads && scatter_;
  buildBuckets(bucketBytes > 0 ? bucketBytes : int64_t(25) << 20);
  if (scatter_)
    partitionBuckets();
  installHooks();
}

Reducer::~Reducer() {
  for (size_t k = 0; k < accumulators_.size(); ++k)
    accumulators_[k]->del_post_hook(hookKeys_[k]);
}

void Reducer::buildBuckets(int64_t bucketBytes) {
  Bucket cur;
  int64_t bytes = 0;
  auto close = [&] {
    if (!cur.members.empty())
      buckets_.push_back(std::move(cur));
    cur = Bucket();
    bytes = 0;
  };
  for (size_t k = params_.size(); k-- > 0;) { // reverse registration order
    const at::Tensor &p = params_[k];
    if (!cur.members.empty() &&
        (p.scalar_type() != params_[cur.members[0]].scalar_type() || bytes >= bucketBytes ||
         (!units_.empty() && units_[k] != units_[cur.members[0]])))
      close();
    bucketOf_[k] = buckets_.size();
    cur.members.push_back(k);
    cur.offsets.push_back(cur.numel);
    cur.numel += p.numel();
    bytes += int64_t(p.nbytes());
  }
  close();
}

// ZeRO: the flat buffers are allocated up front (each launch rewrites the
// members' elements and zeroes the padding) and the shards beside them;
// ZeRO-2 allocates a flat at each launch instead.
void Reducer::partitionBuckets() {
  for (Bucket &b : buckets_) {
    std::vector<int64_t> numels;
    for (size_t m : b.members)
      numels.push_back(params_[m].numel());
    b.zero = partitionBucket(numels, group_->size(), group_->rank());
    auto options = params_[b.members[0]].options().requires_grad(false);
    if (!shardGrads_)
      b.flat = at::zeros({b.zero.padded}, options);
    b.shard = at::zeros({b.zero.shardNumel}, options);
  }
}

void Reducer::installHooks() {
  // The gradient accumulator of a leaf runs after its grad is accumulated;
  // the variable holds it weakly, so keep it alive here (as DDP does).
  for (size_t k = 0; k < params_.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params_[k]);
    hookKeys_.push_back(acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k](const torch::autograd::variable_list &outputs,
                  const torch::autograd::variable_list &) {
          markReady(k);
          return outputs;
        })));
    accumulators_.push_back(std::move(acc));
  }
}

void Reducer::setMainGrads(std::vector<at::Tensor> mainGrads, at::ScalarType dtype) {
  mainGrads_ = std::move(mainGrads);
  flatDtype_ = dtype;
  if (!scatter_)
    return;
  // ZeRO: the flats and shards in the reduction dtype; ZeRO-2's shards sum
  // the micro-batches in float32 whatever it is, as float32 main grads would.
  for (Bucket &b : buckets_) {
    auto options = flatOptions(b);
    if (!shardGrads_)
      b.flat = at::zeros({b.zero.padded}, options);
    b.shard = at::zeros({b.zero.shardNumel}, shardGrads_ ? options.dtype(at::kFloat) : options);
  }
}

bool Reducer::viewsPossible() const {
  // ZeRO-2 keeps no whole gradients for views to live in.
  if (!viewsWanted_ || !reduces() || shardGrads_)
    return false;
  if (mainGrads_.empty())
    return true;
  // Mixed precision: float32 buckets hold the float32 main grads; 16-bit ones
  // cannot, and ZeRO's masters are sharded (their holders may be released).
  if (scatter_ || flatDtype_ != at::kFloat)
    return false;
  for (const at::Tensor &m : mainGrads_)
    if (!m.defined())
      return false;
  return true;
}

namespace {

bool isView(const at::Tensor &grad, const at::Tensor &slot) {
  return grad.defined() && grad.numel() == slot.numel() && grad.data_ptr() == slot.data_ptr();
}

} // namespace

// The flat's: its first member's device, in the reduction dtype (mixed
// precision) or the members' own.
at::TensorOptions Reducer::flatOptions(const Bucket &b) const {
  const at::Tensor &first = params_[b.members[0]];
  return first.options().dtype(flatDtype_.value_or(first.scalar_type())).requires_grad(false);
}

void Reducer::bindViews() {
  at::NoGradGuard noGrad;
  for (Bucket &b : buckets_) {
    if (!b.flat.defined())
      b.flat = at::zeros({b.numel}, flatOptions(b));
    for (size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor &h = holder(b.members[j]);
      at::Tensor view = b.flat.narrow(0, b.offsets[j], h.numel()).view(h.sizes());
      if (h.grad().defined())
        view.copy_(h.grad());
      else
        view.zero_();
      h.mutable_grad() = view;
    }
  }
  viewsBound_ = true;
}

void Reducer::prepare(bool reduce) {
  if (!viewsBound_ && viewsPossible())
    bindViews();
  // A group of one has nothing to sum (but may still have a divisor).
  active_ = reduce && reduces();
  std::fill(armed_.begin(), armed_.end(), active_);
  nextLaunch_ = 0;
  nextComplete_ = 0;
  nextCrossed_ = 0;
  deferred_ = Status::ok();
  std::fill(seen_.begin(), seen_.end(), false);
  for (auto &b : buckets_) {
    b.pending = b.members.size();
    b.work.reset();
    b.crossing = false;
  }
}

void Reducer::arm(size_t param) {
  if (!reduces())
    return;
  active_ = true;
  armed_[param] = true;
}

void Reducer::armAll() {
  if (!reduces())
    return;
  active_ = true;
  std::fill(armed_.begin(), armed_.end(), true);
}

void Reducer::markReady(size_t k) {
  if (!armed_[k] || seen_[k])
    return;
  seen_[k] = true;
  --buckets_[bucketOf_[k]].pending;
  while (nextLaunch_ < buckets_.size() && buckets_[nextLaunch_].pending == 0)
    launch(buckets_[nextLaunch_++]);
  if (shardGrads_)
    drainTo(kZero2InFlight);
  else if (cross_)
    crossTo(kZero2InFlight);
}

namespace {

// A 16-bit bucket is divided before its reduction, as Megatron scales its
// gradients before it reduces them: the sum comes back in the bucket's dtype
// (NCCL adds in it, hop by hop; Gloo adds in float32 and rounds back), where
// the sum of the copies' fp16 gradients can overflow when their mean does
// not. With a power-of-two divisor both orders otherwise give the same bits.
bool dividesFirst(const at::Tensor &flat, int64_t divisor) {
  return divisor != 1 && (flat.scalar_type() == at::kBFloat16 || flat.scalar_type() == at::kHalf);
}

} // namespace

void Reducer::launch(Bucket &b) {
  b.crossing = false;
  if (shardGrads_)
    return launchSharded(b);
  at::NoGradGuard noGrad;
  if (!b.flat.defined())
    b.flat = at::empty({b.numel}, flatOptions(b));
  for (size_t j = 0; j < b.members.size(); ++j) {
    const at::Tensor &p = params_[b.members[j]];
    at::Tensor slot = b.flat.narrow(0, b.offsets[j], p.numel());
    if (isView(holder(b.members[j]).grad(), slot)) {
      // Backward accumulated into the bucket; mixed precision adds the last
      // micro-batch's 16-bit gradient to its earlier ones' float32 sum.
      // Dropped here, not at finish(): a pipeline folds the 16-bit gradients
      // after every backward, and this bucket is on the wire already.
      if (!mainGrads_.empty() && p.grad().defined()) {
        slot.add_(p.grad().detach().reshape({-1}));
        params_[b.members[j]].mutable_grad() = at::Tensor();
      }
      continue;
    }
    if (p.grad().defined())
      slot.copy_(p.grad().detach().reshape({-1}));
    else
      slot.zero_();
    // Mixed precision: the earlier micro-batches' share, kept in float32.
    if (!mainGrads_.empty() && mainGrads_[b.members[j]].grad().defined())
      slot.add_(mainGrads_[b.members[j]].grad().reshape({-1}));
  }
  b.dividedFirst = dividesFirst(b.flat, divisor_);
  if (b.dividedFirst)
    b.flat.narrow(0, 0, b.numel).div_(divisor_);
  if (!scatter_) {
    std::vector<at::Tensor> tensors{b.flat};
    b.work = group_->allReduce(tensors);
    return;
  }
  if (!deferred_.isOk()) { // blocks: a wait failed, nothing more goes on the wire
    b.work = Work::finished(deferred_);
    return;
  }
  // The padding sums as zeros (gatherParams may have written over it).
  b.flat.narrow(0, b.numel, b.zero.padded - b.numel).zero_();
  std::vector<at::Tensor> chunks = b.flat.split(b.zero.shardNumel);
  b.work = group_->reduceScatter(chunks, b.shard);
}

// ZeRO-2: the bucket's gradients into a flat of its own, dropped there; its
// reduce-scatter into the shard, or beside it when the shard holds earlier
// micro-batches of the step.
void Reducer::launchSharded(Bucket &b) {
  at::NoGradGuard noGrad;
  b.flat = at::empty({b.zero.padded}, flatOptions(b));
  b.incoming = at::Tensor(); // a failed step may have left one
  for (size_t j = 0; j < b.members.size(); ++j) {
    at::Tensor &p = params_[b.members[j]];
    at::Tensor slot = b.flat.narrow(0, b.offsets[j], p.numel());
    if (p.grad().defined())
      slot.copy_(p.grad().detach().reshape({-1}));
    else
      slot.zero_();
    p.mutable_grad() = at::Tensor();
    if (mainGrads_.empty())
      continue;
    at::Tensor &main = mainGrads_[b.members[j]].mutable_grad();
    if (main.defined()) // a pipeline's earlier micro-batches, folded in float32
      slot.add_(main.reshape({-1}));
    main = at::Tensor();
  }
  if (!deferred_.isOk()) { // a wait failed: nothing more goes on the wire
    b.work = Work::finished(deferred_);
    return;
  }
  b.flat.narrow(0, b.numel, b.zero.padded - b.numel).zero_();
  b.dividedFirst = dividesFirst(b.flat, divisor_);
  if (b.dividedFirst)
    b.flat.narrow(0, 0, b.numel).div_(divisor_);
  // Straight into the shard when it is empty and of the flat's dtype.
  if (shardsHold_ || b.shard.scalar_type() != b.flat.scalar_type())
    b.incoming = at::empty({b.zero.shardNumel}, b.flat.options());
  std::vector<at::Tensor> chunks = b.flat.split(b.zero.shardNumel);
  b.work = group_->reduceScatter(chunks, b.incoming.defined() ? b.incoming : b.shard);
}

// ZeRO-2: waits for bucket i (in blocks: its sum over the blocks), divides
// what arrived and adds it to the shard (or writes it there, the step's
// first), and releases the flat. After a failure nothing more is waited for
// (each wait would take the whole timeout), and the buffers stay: the device
// may still be reading them.
Status Reducer::complete(size_t i) {
  Bucket &b = buckets_[i];
  Status st = deferred_.isOk() ? waitBucket(i, "gradient reducer") : deferred_;
  if (!st.isOk())
    return st;
  at::NoGradGuard noGrad;
  at::Tensor &got = b.incoming.defined() ? b.incoming : b.shard;
  if (divisor_ != 1 && !b.dividedFirst)
    got.div_(divisor_);
  if (b.incoming.defined() && shardsHold_)
    b.shard.add_(b.incoming);
  else if (b.incoming.defined())
    b.shard.copy_(b.incoming);
  b.flat = at::Tensor();
  b.incoming = at::Tensor();
  b.work.reset();
  b.crossing = false;
  return st;
}

// ZeRO-2, inside backward: completes buckets until at most `keep` are in
// flight (in blocks: `keep` reduce-scatters and `keep` sums over the blocks);
// a failure is kept for finish() to report.
void Reducer::drainTo(size_t keep) {
  if (cross_)
    crossTo(keep);
  const size_t sent = cross_ ? nextCrossed_ : nextLaunch_;
  while (sent - nextComplete_ > keep) {
    Status st = complete(nextComplete_++);
    if (!st.isOk() && deferred_.isOk())
      deferred_ = std::move(st);
  }
}

Status Reducer::waitBucket(size_t i, const char *what) {
  const Bucket &b = buckets_[i];
  Status st = b.work->wait(timeout_);
  if (st.isOk())
    return st;
  const CommBackend &on = b.crossing ? *cross_ : *group_;
  return Status::error(fmt::format("{}{} on {}: bucket {} of {} (first tensor '{}'): {}", what,
                                   b.crossing ? " (the sum over the ZeRO blocks)" : "",
                                   on.group().describe(), i, buckets_.size(), names_[b.members[0]],
                                   st.message()),
                       st.kind());
}

// ZeRO in blocks, after bucket i's reduce-scatter inside the block: its
// shard (ZeRO-2: what arrived) summed over the blocks.
void Reducer::sumOverBlocks(size_t i) {
  Bucket &b = buckets_[i];
  std::vector<at::Tensor> tensors{b.incoming.defined() ? b.incoming : b.shard};
  b.work = cross_->allReduce(tensors);
  b.crossing = true;
}

// ZeRO in blocks, inside backward: waits for the reduce-scatters of all but
// the last `keep` buckets launched and sends their sums over the blocks
// (ZeRO-2 no longer needs the flat then). A failure is kept for finish(),
// and nothing more is sent.
void Reducer::crossTo(size_t keep) {
  while (nextLaunch_ - nextCrossed_ > keep) {
    size_t i = nextCrossed_++;
    Status st = deferred_.isOk() ? waitBucket(i, "gradient reducer") : deferred_;
    if (!st.isOk()) {
      if (deferred_.isOk())
        deferred_ = std::move(st);
      continue;
    }
    sumOverBlocks(i);
    if (shardGrads_)
      buckets_[i].flat = at::Tensor();
  }
}

Status Reducer::gatherParams(const std::vector<at::Tensor> &owned,
                             const std::vector<at::Tensor> &into,
                             const std::vector<size_t> &which) {
  at::NoGradGuard noGrad;
  const std::vector<at::Tensor> &target = into.empty() ? params_ : into;
  std::vector<size_t> order = which;
  if (which.empty())
    for (size_t i = 0; i < buckets_.size(); ++i)
      order.push_back(i);
  std::vector<at::Tensor> gathered(buckets_.size());
  // Waits for bucket i's all-gather and writes its members.
  auto drain = [&](size_t i) -> Status {
    NNSC_RETURN_IF_ERROR(waitBucket(i, "parameter all-gather"));
    Bucket &b = buckets_[i];
    for (size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor p = target[b.members[j]].detach();
      p.copy_(gathered[i].narrow(0, b.offsets[j], p.numel()).view(p.sizes()));
    }
    // The flat holds the gradients when they are its views: zero again, as
    // the optimizer left them, for the next backward to accumulate into.
    if (viewsBound_ && gathered[i].is_alias_of(b.flat))
      b.flat.zero_();
    gathered[i] = at::Tensor();
    b.work.reset();
    return Status::ok();
  };
  // ZeRO-2 has no flats to borrow: a buffer per bucket, at most
  // kZero2InFlight at once. ZeRO-1 launches every bucket, then waits.
  const size_t window = shardGrads_ ? kZero2InFlight : buckets_.size();
  size_t drained = 0;
  for (size_t n = 0; n < order.size(); ++n) {
    const size_t i = order[n];
    Bucket &b = buckets_[i];
    for (; drained + window <= n; ++drained)
      NNSC_RETURN_IF_ERROR(drain(order[drained]));
    const bool mine = owned.empty() || !owned[i].defined(); // this rank's range of the params
    at::ScalarType dtype = mine ? params_[b.members[0]].scalar_type() : owned[i].scalar_type();
    // Into the flat's own storage when it is wide enough (the next launch
    // rewrites it), else a buffer of its own.
    if (!b.flat.defined())
      gathered[i] = at::empty({b.zero.padded}, b.shard.options().dtype(dtype));
    else if (b.flat.scalar_type() == dtype)
      gathered[i] = b.flat;
    else if (b.flat.element_size() >= int64_t(c10::elementSize(dtype)))
      gathered[i] = b.flat.view(dtype).narrow(0, 0, b.zero.padded);
    else
      gathered[i] = at::empty({b.zero.padded}, b.flat.options().dtype(dtype));
    at::Tensor own = gathered[i].narrow(0, b.zero.shardBegin, b.zero.shardNumel);
    if (!mine)
      own.copy_(owned[i]);
    else
      for (const ZeroPiece &p : b.zero.pieces)
        own.narrow(0, p.shardOffset, p.length)
            .copy_(params_[b.members[p.member]].detach().reshape({-1}).narrow(
                0, p.paramOffset, p.length));
    std::vector<at::Tensor> outputs = gathered[i].split(b.zero.shardNumel);
    b.work = group_->allGather(own, outputs);
    b.crossing = false;
  }
  for (; drained < order.size(); ++drained)
    NNSC_RETURN_IF_ERROR(drain(order[drained]));
  return Status::ok();
}

Status Reducer::finish() {
  if (!active_)
    return Status::ok();
  while (nextLaunch_ < buckets_.size()) {
    launch(buckets_[nextLaunch_++]);
    if (shardGrads_) // buckets whose gradients never came: still two at a time
      drainTo(kZero2InFlight);
    else if (cross_)
      crossTo(kZero2InFlight);
  }
  active_ = false;
  std::fill(armed_.begin(), armed_.end(), false);
  if (shardGrads_) {
    drainTo(0);
    Status st = std::exchange(deferred_, Status::ok());
    if (!st.isOk())
      return st;
    shardsHold_ = true; // the next micro-batch of the step adds to it
    return Status::ok();
  }
  at::NoGradGuard noGrad;
  if (cross_) { // the last sums over the blocks sent; all of them waited for below
    crossTo(0);
    if (Status st = std::exchange(deferred_, Status::ok()); !st.isOk())
      return st;
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket &b = buckets_[i];
    NNSC_RETURN_IF_ERROR(waitBucket(i, "gradient reducer"));
    const bool divided = b.dividedFirst;
    if (scatter_) {
      if (divisor_ != 1 && !divided)
        b.shard.div_(divisor_);
      for (size_t j = 0; j < b.members.size(); ++j) {
        at::Tensor &p = params_[b.members[j]];
        if (!mainGrads_.empty()) { // mixed precision: both parts are in the bucket now
          p.mutable_grad() = at::Tensor();
          mainGrads_[b.members[j]].mutable_grad() = at::Tensor();
        } else if (viewsBound_) { // the local gradient, a view again if replaced
          at::Tensor local = b.flat.narrow(0, b.offsets[j], p.numel()).view(p.sizes());
          if (!isView(p.grad(), local))
            p.mutable_grad() = local;
        }
      }
      continue;
    }
    if (divisor_ != 1 && !divided)
      b.flat.div_(divisor_);
    for (size_t j = 0; j < b.members.size(); ++j) {
      at::Tensor &p = params_[b.members[j]];
      at::Tensor src = b.flat.narrow(0, b.offsets[j], p.numel()).view(p.sizes());
      if (!mainGrads_.empty()) {
        at::Tensor &main = mainGrads_[b.members[j]].mutable_grad();
        if (viewsBound_) {
          if (!isView(main, src))
            main = src;
        } else if (main.defined()) {
          main.copy_(src);
        } else {
          main = src.to(at::kFloat, false, true);
        }
        p.mutable_grad() = at::Tensor();
        continue;
      }
      if (viewsBound_) { // a .grad replaced from outside becomes a view again
        if (!isView(p.grad(), src))
          p.mutable_grad() = src;
        continue;
      }
      if (p.grad().defined())
        p.mutable_grad().detach().copy_(src);
      else
        p.mutable_grad() = src.clone();
    }
  }
  return Status::ok();
}

} // namespace nnsc::rt
