// The worker of nnsc-profile-device: achieved matmul FLOP/s per dtype,
// memory bandwidth and the launch floor, measured with LibTorch on this
// worker's threads while every other worker of the job measures too.
#include <algorithm>
#include <chrono>
#include <memory>
#include <ostream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "CudaInfo.h"
#include "DeviceBench.h"
#include "nnsc/Profile/CommTable.h"
#include "nnsc/Profile/DeviceSpecFile.h"
#include "nnsc/Profile/HostInfo.h"
#include "nnsc/Runtime/Comm.h"
#include "nnsc/Support/File.h"

namespace nnsc::profile {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

at::ScalarType scalarType(const std::string &dtype) {
  if (dtype == "bfloat16")
    return at::kBFloat16;
  if (dtype == "float16")
    return at::kHalf;
  return at::kFloat;
}

// Where the work runs and how to wait for it.
struct Target {
  at::Device device{at::kCPU};
  void sync() const {
    if (device.is_cuda())
      torch::cuda::synchronize(device.index());
  }
  at::TensorOptions options(at::ScalarType t) const {
    return at::TensorOptions().dtype(t).device(device);
  }
};

struct MatmulFigure {
  double flops = 0; ///< best over sizes; 0 = not measured
  std::string note; ///< why not, or which size won
};

// The best rate of square matmuls over `sizes`; a size whose first product
// overruns the budget is the last one tried.
MatmulFigure measureMatmul(const Target &t, at::ScalarType dtype, const std::vector<int64_t> &sizes,
                           double budget) {
  MatmulFigure fig;
  for (int64_t n : sizes) {
    at::Tensor a = at::randn({n, n}, t.options(at::kFloat)).to(dtype);
    at::Tensor b = at::randn({n, n}, t.options(at::kFloat)).to(dtype);
    double best = 0, spent = 0;
    try {
      auto t0 = Clock::now();
      at::mm(a, b);
      t.sync();
      best = spent = since(t0);
    } catch (const std::exception &) {
      fig.note = fmt::format("no {} matmul on {}", c10::toString(dtype), t.device.str());
      return fig;
    }
    for (int rep = 0; spent < budget && rep < 100; ++rep) {
      auto t0 = Clock::now();
      at::mm(a, b);
      t.sync();
      double dt = since(t0);
      best = std::min(best, dt);
      spent += dt;
    }
    double rate = 2.0 * double(n) * double(n) * double(n) / best;
    if (rate > fig.flops) {
      fig.flops = rate;
      fig.note = fmt::format("best at n={}", n);
    }
    if (spent > 2 * budget)
      break; // a larger size would take too long
  }
  return fig;
}

// Bytes read plus written per second by a copy of `bytes`, best of 5.
double measureCopy(const Target &t, int64_t bytes) {
  at::Tensor src = at::ones({bytes / 4}, t.options(at::kFloat));
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src);
  t.sync();
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    dst.copy_(src);
    t.sync();
    best = std::min(best, since(t0));
  }
  return 2.0 * double(bytes) / best;
}

// The median time of a tiny op (an add of two 1-element tensors) issued back
// to back: the cost every op pays whatever its size.
double measureFloor(const Target &t) {
  at::Tensor x = at::ones({1}, t.options(at::kFloat)), y = at::ones({1}, t.options(at::kFloat));
  constexpr int kBatch = 200;
  std::vector<double> perOp;
  for (int batch = 0; batch < 21; ++batch) {
    auto t0 = Clock::now();
    for (int i = 0; i < kBatch; ++i)
      at::add(x, y);
    t.sync();
    perOp.push_back(since(t0) / kBatch);
  }
  std::sort(perOp.begin(), perOp.end());
  return perOp[perOp.size() / 2];
}

// The slowest worker's figures: every rate's minimum, the floor's maximum.
Status agree(rt::CommWorld *world, const Target &t, std::vector<double> &rates, double &floor) {
  if (!world)
    return Status::ok();
  std::vector<double> values = rates;
  values.push_back(-floor);
  std::vector<at::Tensor> v = {at::tensor(values, at::TensorOptions(at::kDouble)).to(t.device)};
  NNSC_RETURN_IF_ERROR(world->world().allReduce(v, rt::ReduceOp::Min)->wait());
  at::Tensor host = v[0].cpu();
  for (size_t i = 0; i < rates.size(); ++i)
    rates[i] = host[int64_t(i)].item<double>();
  floor = -host[int64_t(rates.size())].item<double>();
  return Status::ok();
}

struct Figures {
  std::vector<double> rates; ///< per plan.dtypes, then bandwidth
  double floor = 0;
  std::vector<std::string> notes;
};

Expected<Figures> measureAll(const DevicePlan &plan, const Target &t, rt::CommWorld *world,
                             const std::vector<int64_t> &sizes, int64_t copyBytes) {
  auto together = [&]() { return world ? world->world().barrier()->wait() : Status::ok(); };
  Figures f;
  for (const std::string &dtype : plan.dtypes) {
    NNSC_RETURN_IF_ERROR(together());
    MatmulFigure m = measureMatmul(t, scalarType(dtype), sizes, plan.seconds);
    f.rates.push_back(m.flops);
    f.notes.push_back(fmt::format("{}: {}", dtype, m.note));
  }
  NNSC_RETURN_IF_ERROR(together());
  f.rates.push_back(measureCopy(t, copyBytes));
  NNSC_RETURN_IF_ERROR(together());
  f.floor = measureFloor(t);
  NNSC_RETURN_IF_ERROR(agree(world, t, f.rates, f.floor));
  return f;
}

MeasuredDevice describe(const DevicePlan &plan, const Target &t, const Figures &f, int threads,
                        int workers, const std::vector<int64_t> &sizes, int64_t copyBytes) {
  MeasuredDevice d;
  d.name = plan.name;
  std::string perWorker =
      workers > 1 ? fmt::format(" per worker, {} workers measuring at once", workers) : "";
  if (t.device.is_cuda()) {
    std::string gpu = cudaDeviceName(int(t.device.index()));
    d.description = gpu.empty() ? "a CUDA device" : gpu;
    d.memoryBytes = cudaMemoryBytes(int(t.device.index()));
  } else {
    d.description = fmt::format("{}, {} threads{}", cpuModel(), threads, perWorker);
    d.memoryBytes = memTotalBytes();
  }
  d.sources.push_back(fmt::format(
      "measured by nnsc-profile-device on {} {}: matmul {}..{} best over up to {} s per size; "
      "copy {}; launch floor = median of 21 x 200 one-element adds; {} threads{}",
      hostName(), isoDateTime(), sizes.front(), sizes.back(), plan.seconds, formatBytes(copyBytes),
      threads, perWorker));
  for (size_t i = 0; i < plan.dtypes.size(); ++i)
    if (f.rates[i] > 0)
      d.flops.emplace_back(plan.dtypes[i], f.rates[i]);
  d.memoryBandwidth = f.rates.back();
  d.launchFloor = f.floor;
  return d;
}

Status measureAndWrite(const DevicePlan &plan, const rt::LaunchEnv &env, const Target &t,
                       int threads, std::ostream &out) {
  auto start = Clock::now();
  std::unique_ptr<rt::CommWorld> world;
  if (env.worldSize > 1) {
    rt::CommOptions options;
    options.backend = t.device.is_cuda() ? "nccl" : "gloo";
    auto created = rt::CommWorld::create(env, options);
    if (!created)
      return created.status();
    world = created.take();
  }
  std::vector<int64_t> sizes = t.device.is_cuda() ? std::vector<int64_t>{1024, 2048, 4096, 8192}
                                                  : std::vector<int64_t>{256, 512, 1024, 2048};
  int64_t copyBytes = t.device.is_cuda() ? (int64_t(1) << 30) : (int64_t(256) << 20);
  auto f = measureAll(plan, t, world.get(), sizes, copyBytes);
  if (!f)
    return f.status();
  if (env.rank != 0)
    return Status::ok();
  MeasuredDevice d = describe(plan, t, *f, threads, env.worldSize, sizes, copyBytes);
  if (d.flops.empty())
    return errorf("no matmul could be measured on {} ({})", t.device.str(),
                  fmt::join(f->notes, "; "));
  NNSC_RETURN_IF_ERROR(writeFileAtomic(plan.out, formatDeviceSpec(d)));
  for (size_t i = 0; i < plan.dtypes.size(); ++i)
    out << fmt::format("matmul {:<9} {:>10} FLOP/s ({})\n", plan.dtypes[i],
                       f->rates[i] > 0 ? formatReal(f->rates[i]) : "-", f->notes[i]);
  out << fmt::format("memory bandwidth {} B/s, launch floor {} s, memory {}\n",
                     formatReal(d.memoryBandwidth), formatReal(d.launchFloor),
                     formatBytes(d.memoryBytes));
  out << fmt::format(
      "nnsc-profile-device: wrote {} ({}, {} threads{}) in {:.1f} s\n", plan.out, d.name, threads,
      env.worldSize > 1 ? fmt::format(" x {} workers", env.worldSize) : "", since(start));
  return Status::ok();
}

} // namespace

Status runDeviceWorker(const DevicePlan &plan, const rt::LaunchEnv &env, std::ostream &out) {
  // nnsc-run's rule (TrainerSetup seedAndThreads): the cores shared by the
  // workers on this node, at least one each.
  int threads =
      plan.threads > 0
          ? plan.threads
          : std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, env.localWorldSize));
  at::set_num_threads(threads);
  Target t;
  if (plan.device == "cuda") {
    if (!torch::cuda::is_available())
      return errorf("--device cuda: this LibTorch sees no CUDA device");
    t.device = at::Device(at::kCUDA, env.localRank);
  }
  try {
    return measureAndWrite(plan, env, t, threads, out);
  } catch (const std::exception &e) {
    std::string what = e.what();
    return Status::internal(fmt::format("nnsc-profile-device: error: rank {}: {}", env.rank,
                                        what.substr(0, what.find('\n'))));
  }
}

} // namespace nnsc::profile
