#include "nnsc/Runtime/Zero3.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <fmt/format.h>

namespace nnsc::rt {

namespace {

Zero3Params *gActive = nullptr;

c10::StorageImpl &storageOf(const at::Tensor &t) { return *t.storage().unsafeGetStorageImpl(); }

} // namespace

Zero3Params::~Zero3Params() {
  if (gActive == this)
    gActive = nullptr;
  (void)drain(); // a collective in flight keeps writing into its buffer
}

Zero3Params *Zero3Params::active() { return gActive; }
void Zero3Params::setActive(Zero3Params *params) { gActive = params; }

void Zero3Params::add(Reducer &reducer, ZeroOptimizer &optimizer,
                      const std::vector<std::string> &units) {
  at::NoGradGuard noGrad;
  for (size_t b = 0; b < reducer.numBuckets(); ++b) {
    int unit = reducer.bucketUnit(b);
    if (unit < 0 || size_t(unit) >= units.size())
      continue;
    const std::vector<size_t> &members = reducer.bucketMembers(b);
    const std::vector<int64_t> &offsets = reducer.bucketOffsets(b);
    const at::Tensor &first = reducer.params()[members[0]];
    Entry e{&reducer, &optimizer, b,
            at::zeros({reducer.zeroLayout(b).padded}, first.options().requires_grad(false))};
    for (size_t j = 0; j < members.size(); ++j) {
      at::Tensor p = reducer.params()[members[j]]; // the same parameter, not a copy
      at::Tensor slot = e.whole.narrow(0, offsets[j], p.numel());
      slot.copy_(p.detach().reshape({-1}));
      p.set_data(slot.view(p.sizes()));
    }
    e.uses = 1; // whole until releaseAll
    byFunction_[units[size_t(unit)]].push_back(entries_.size());
    entries_.push_back(std::move(e));
  }
}

void Zero3Params::free(Entry &e) {
  c10::StorageImpl &s = storageOf(e.whole);
  s.set_data_ptr_noswap(at::DataPtr(nullptr, e.whole.device()));
  s.set_nbytes(0);
}

Zero3Params::Launch Zero3Params::prepare(size_t entry) {
  Entry &e = entries_[entry];
  Launch l;
  l.entry = entry;
  l.src = e.optimizer->gatherSource(e.bucket); // alive until the all-gather is waited for
  l.fresh = at::empty({e.reducer->zeroLayout(e.bucket).padded}, l.src.options());
  return l;
}

void Zero3Params::issue(std::vector<Launch> &launches) {
  for (Launch &l : launches) {
    if (l.work)
      continue; // prefetched
    Entry &e = entries_[l.entry];
    std::vector<at::Tensor> outputs = l.fresh.split(e.reducer->zeroLayout(e.bucket).shardNumel);
    l.work = e.reducer->group().allGather(l.src, outputs);
  }
}

Status Zero3Params::gatherError(const Entry &e, const std::string &function,
                                const Status &st) const {
  return Status::error(
      fmt::format("ZeRO-3 parameter all-gather for {} on {}: bucket {} (first tensor '{}'): {}",
                  function, e.reducer->group().group().describe(), e.bucket,
                  e.reducer->names()[e.reducer->bucketMembers(e.bucket)[0]], st.message()),
      st.kind());
}

Status Zero3Params::install(const Launch &l, const std::string &function) {
  Entry &e = entries_[l.entry];
  Status st = l.work->wait();
  if (!st.isOk())
    return gatherError(e, function, st);
  // Gloo carries 16-bit values widened: float32 arrived, rounded here.
  at::Tensor got =
      l.fresh.scalar_type() == e.whole.scalar_type() ? l.fresh : l.fresh.to(e.whole.scalar_type());
  c10::StorageImpl &from = storageOf(got), &to = storageOf(e.whole);
  size_t nbytes = from.nbytes();
  to.set_data_ptr_noswap(from.set_data_ptr(at::DataPtr(nullptr, got.device())));
  from.set_nbytes(0);
  to.set_nbytes(nbytes);
  return Status::ok();
}

void Zero3Params::learn(const std::string &function, Pass pass) {
  const int p = pass == Pass::Forward ? 0 : 1;
  if (p == 1 && last_[1].empty())
    firstBackward_ = function;
  if (!last_[p].empty() && last_[p] != function)
    next_[p][last_[p]] = function;
  last_[p] = function;
  endPass(1 - p); // the other pass starts over
}

// The unit gathered last in pass p had no other after it: nothing to
// prefetch after it next time.
void Zero3Params::endPass(int p) {
  if (!last_[p].empty())
    next_[p].erase(last_[p]);
  last_[p].clear();
}

void Zero3Params::beginForward() {
  endPass(0);
  endPass(1);
}

void Zero3Params::startPrefetch(const std::string &function, Pass pass) {
  const auto &next = next_[pass == Pass::Forward ? 0 : 1];
  auto n = next.find(function);
  if (n == next.end())
    return;
  auto unit = byFunction_.find(n->second);
  if (unit == byFunction_.end())
    return;
  for (size_t k : unit->second)
    if (entries_[k].uses > 0)
      return; // whole already
  // Every buffer first: a failed allocation leaves none of the unit's
  // all-gathers issued (the peers' then time out whole, not in the middle).
  std::vector<Launch> launched;
  for (size_t k : unit->second)
    launched.push_back(prepare(k));
  issue(launched);
  pending_ = std::move(launched);
  pendingFunction_ = n->second;
}

Status Zero3Params::drain() {
  releaseKept();
  return dropPrefetch();
}

Status Zero3Params::dropPrefetch() {
  std::vector<Launch> pending = std::move(pending_);
  std::string function = std::move(pendingFunction_);
  pending_.clear();
  pendingFunction_.clear();
  if (pending.empty())
    return Status::ok();
  ++prefetchesDropped_;
  // Every one waited for (a failure is reported once all have ended: none
  // still writes into its buffer when this returns).
  Status first = Status::ok();
  for (const Launch &l : pending)
    if (Status st = l.work->wait(); !st.isOk() && first.isOk())
      first = gatherError(entries_[l.entry], function + " (prefetched)", st);
  return first;
}

Status Zero3Params::gather(const std::string &function, Pass pass) {
  auto it = byFunction_.find(function);
  if (it == byFunction_.end())
    return Status::ok();
  at::NoGradGuard noGrad;
  // This unit's prefetch is taken; another unit's waited for and dropped.
  std::vector<Launch> prefetched;
  if (pendingFunction_ == function) {
    prefetched = std::move(pending_);
    pending_.clear();
    pendingFunction_.clear();
  } else {
    NNSC_RETURN_IF_ERROR(dropPrefetch());
  }
  std::vector<size_t> counted; // entries whose count this call raised
  // A failure (a status, or an exception such as an allocation's) leaves
  // none of them gathered: the caller releases nothing, a later gather
  // starts over.
  auto undo = [&] {
    for (size_t k : counted)
      if (--entries_[k].uses == 0)
        free(entries_[k]);
  };
  counted.reserve(it->second.size()); // the push_back below cannot throw
  try {
    if (!kept_.empty() && kept_ == function) {
      // Whole since its forward: the count kept becomes this call's.
      kept_.clear();
      counted = it->second;
      ++keptUsed_;
    } else {
      releaseKept();
      std::vector<Launch> launches;
      for (size_t k : it->second) {
        Entry &e = entries_[k];
        counted.push_back(k);
        if (++e.uses > 1)
          continue;
        auto pre = std::find_if(prefetched.begin(), prefetched.end(),
                                [&](const Launch &l) { return l.entry == k; });
        launches.push_back(pre != prefetched.end() ? *pre : prepare(k));
      }
      issue(launches);
      // Each launch waited for, also past a failed one (none may still write
      // into a buffer once this returns); the first failure is reported.
      Status failed = Status::ok();
      for (const Launch &l : launches)
        if (Status st = install(l, function); !st.isOk() && failed.isOk())
          failed = st;
      if (!failed.isOk()) {
        undo();
        return failed;
      }
      if (!launches.empty())
        ++gathers_;
      if (!prefetched.empty())
        ++prefetchesUsed_;
    }
    learn(function, pass);
    if (prefetch_)
      startPrefetch(function, pass); // runs while this unit computes
  } catch (...) {
    undo();
    throw;
  }
  return Status::ok();
}

void Zero3Params::release(const std::string &function, bool backwardFollows) {
  auto it = byFunction_.find(function);
  if (it == byFunction_.end())
    return;
  // The unit backward re-runs first stays whole for that re-run (the last
  // of nested calls only; one such unit at a time).
  if (backwardFollows && prefetch_ && kept_.empty() && function == firstBackward_ &&
      entries_[it->second.front()].uses == 1) {
    kept_ = function;
    return;
  }
  decrement(function);
}

void Zero3Params::decrement(const std::string &function) {
  auto it = byFunction_.find(function);
  if (it == byFunction_.end())
    return;
  for (size_t k : it->second) {
    Entry &e = entries_[k];
    if (e.uses > 0 && --e.uses == 0)
      free(e);
  }
}

void Zero3Params::releaseKept() {
  if (kept_.empty())
    return;
  std::string function = std::move(kept_);
  kept_.clear();
  decrement(function);
}

void Zero3Params::releaseAll() {
  (void)drain(); // nothing may still write into a buffer
  for (Entry &e : entries_) {
    e.uses = 0;
    free(e);
  }
}

bool Zero3Params::aliases(const at::Tensor &t) const {
  if (!t.defined() || !t.has_storage())
    return false;
  for (const Entry &e : entries_)
    if (e.uses > 0 && t.is_alias_of(e.whole))
      return true;
  return false;
}

int64_t Zero3Params::bucketBytes() const {
  int64_t bytes = 0;
  for (const Entry &e : entries_)
    bytes += e.whole.numel() * int64_t(e.whole.element_size());
  return bytes;
}

} // namespace nnsc::rt
