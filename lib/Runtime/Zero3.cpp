#include "nnsc/Runtime/Zero3.h"

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

Status Zero3Params::gather(const std::string &function) {
  auto it = byFunction_.find(function);
  if (it == byFunction_.end())
    return Status::ok();
  at::NoGradGuard noGrad;
  struct Launch {
    size_t entry;
    at::Tensor fresh;
    WorkPtr work;
  };
  std::vector<Launch> launches;
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
    for (size_t k : it->second) {
      Entry &e = entries_[k];
      counted.push_back(k);
      if (++e.uses > 1)
        continue;
      const ZeroBucketLayout &layout = e.reducer->zeroLayout(e.bucket);
      at::Tensor src = e.optimizer->gatherSource(e.bucket);
      at::Tensor fresh = at::empty({layout.padded}, src.options());
      std::vector<at::Tensor> outputs = fresh.split(layout.shardNumel);
      WorkPtr work = e.reducer->group().allGather(src, outputs);
      launches.push_back({k, fresh, work});
    }
    for (size_t n = 0; n < launches.size(); ++n) {
      Launch &l = launches[n];
      Entry &e = entries_[l.entry];
      Status st = l.work->wait();
      if (!st.isOk()) {
        undo();
        return Status::error(
            fmt::format(
                "ZeRO-3 parameter all-gather for {} on {}: bucket {} (first tensor '{}'): {}",
                function, e.reducer->group().group().describe(), e.bucket,
                e.reducer->names()[e.reducer->bucketMembers(e.bucket)[0]], st.message()),
            st.kind());
      }
      // Gloo carries 16-bit values widened: float32 arrived, rounded here.
      at::Tensor got = l.fresh.scalar_type() == e.whole.scalar_type()
                           ? l.fresh
                           : l.fresh.to(e.whole.scalar_type());
      c10::StorageImpl &from = storageOf(got), &to = storageOf(e.whole);
      size_t nbytes = from.nbytes();
      to.set_data_ptr_noswap(from.set_data_ptr(at::DataPtr(nullptr, got.device())));
      from.set_nbytes(0);
      to.set_nbytes(nbytes);
    }
  } catch (...) {
    undo();
    throw;
  }
  return Status::ok();
}

void Zero3Params::release(const std::string &function) {
  auto it = byFunction_.find(function);
  if (it == byFunction_.end())
    return;
  for (size_t k : it->second) {
    Entry &e = entries_[k];
    if (e.uses > 0 && --e.uses == 0)
      free(e);
  }
}

void Zero3Params::releaseAll() {
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
