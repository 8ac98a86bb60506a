// A CPU allocator that counts live bytes (AllocationCounter.h).
#include "nnsc/Runtime/AllocationCounter.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>

#include "nnsc/Torch/Compat.h"

namespace nnsc::rt {

namespace {

struct Held {
  c10::DataPtr inner; // what the wrapped allocator gave: freed when erased
  size_t bytes = 0;
};

struct Counts {
  std::mutex mutex;
  std::unordered_map<void *, Held> held;
  int64_t live = 0, peak = 0;
};

Counts &counts() {
  static Counts *c = new Counts; // outlives every tensor freed at exit
  return *c;
}

void release(void *data) {
  Counts &c = counts();
  Held gone;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.held.find(data);
    if (it == c.held.end())
      return;
    gone = std::move(it->second);
    c.held.erase(it);
    c.live -= static_cast<int64_t>(gone.bytes);
  }
} // `gone` frees the storage here, outside the lock

class CountingAllocator final : public c10::Allocator {
public:
  explicit CountingAllocator(c10::Allocator *base) : base_(base) {}

  // LibTorch 2.3 made allocate non-const and added copy_data.
#if NNSC_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t bytes) override {
#else
  c10::DataPtr allocate(size_t bytes) const override {
#endif
    c10::DataPtr inner = base_->allocate(bytes);
    void *data = inner.get();
    if (!data)
      return inner;
    c10::Device device = inner.device();
    Counts &c = counts();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.held[data] = Held{std::move(inner), bytes};
    c.live += static_cast<int64_t>(bytes);
    c.peak = std::max(c.peak, c.live);
    return {data, data, &release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if NNSC_TORCH_AT_LEAST(2, 3)
  void copy_data(void *dest, const void *src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

private:
  c10::Allocator *base_;
};

} // namespace

void installCpuAllocationCounter() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CountingAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
  });
}

int64_t cpuLiveBytes() {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.live;
}

int64_t cpuPeakBytes() {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.peak;
}

void resetCpuPeakBytes() {
  Counts &c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.peak = c.live;
}

} // namespace nnsc::rt
