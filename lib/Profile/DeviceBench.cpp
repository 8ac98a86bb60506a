// The worker of nnsc-profile-device: achieved matmul FLOP/s per dtype,
// memory bandwidth and the launch floor, measured with LibTorch on this
// worker's threads while every other worker of the job measures too.
#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <memory>
#include <ostream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include "CudaInfo.h"
#include "DeviceBench.h"
#include "nnsc/Profile/CommTable.h"
#include "nnsc/Profile/DeviceSpecFile.h"
#include "nnsc/Profile/HostInfo.h"
#include "nnsc/Runtime/CpuBinding.h"
#include "nnsc/Runtime/Threads.h"
#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/Optimizer.h"
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

// The other workers measuring at the same time (none in a single process).
// Every worker makes the same calls, so a decision taken through any() is
// the same everywhere and the workers stay in step.
struct Peers {
  rt::CommWorld *world = nullptr;
  at::Device device{at::kCPU};

  Status barrier() const { return world ? world->world().barrier()->wait() : Status::ok(); }

  /// True when `flag` is true on any worker.
  Expected<bool> any(bool flag) const {
    if (!world)
      return flag;
    std::vector<at::Tensor> v = {
        at::full({1}, flag ? 1.0 : 0.0, at::TensorOptions(at::kDouble).device(device))};
    NNSC_RETURN_IF_ERROR(world->world().allReduce(v, rt::ReduceOp::Max)->wait());
    return v[0].cpu().item<double>() > 0;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `op` back to back for `window` seconds (at least `minReps` times) and
// returns the median time of one run. Workers start their windows together,
// so every timed run overlaps the others' work, as in training.
template <typename Op> double medianInWindow(const Target &t, double window, int minReps, Op op) {
  std::vector<double> reps;
  auto start = Clock::now();
  while (int(reps.size()) < minReps || (since(start) < window && reps.size() < 1000)) {
    auto t0 = Clock::now();
    op();
    t.sync();
    reps.push_back(since(t0));
  }
  return median(reps);
}

struct MatmulFigure {
  double flops = 0; ///< best over sizes; 0 = not measured
  std::string note; ///< why not, or which size won
};

// The best rate of square matmuls over `sizes`; a size whose first product
// overruns the budget on any worker is the last one tried.
Expected<MatmulFigure> measureMatmul(const Target &t, const Peers &peers, at::ScalarType dtype,
                                     const std::vector<int64_t> &sizes, double budget) {
  MatmulFigure fig;
  for (int64_t n : sizes) {
    at::Tensor a = at::randn({n, n}, t.options(at::kFloat)).to(dtype);
    at::Tensor b = at::randn({n, n}, t.options(at::kFloat)).to(dtype);
    NNSC_RETURN_IF_ERROR(peers.barrier());
    bool unsupported = false;
    double first = 0;
    try {
      auto t0 = Clock::now();
      at::mm(a, b);
      t.sync();
      first = since(t0);
    } catch (const std::exception &) {
      unsupported = true;
    }
    auto none = peers.any(unsupported);
    if (!none)
      return none.status();
    if (*none) {
      fig.note = fmt::format("no {} matmul on {}", c10::toString(dtype), t.device.str());
      return fig;
    }
    double one = medianInWindow(t, budget, 3, [&] { at::mm(a, b); });
    double rate = 2.0 * double(n) * double(n) * double(n) / one;
    if (rate > fig.flops) {
      fig.flops = rate;
      fig.note = fmt::format("best at n={}", n);
    }
    auto tooSlow = peers.any(first > budget);
    if (!tooSlow)
      return tooSlow.status();
    if (*tooSlow)
      break; // a larger size would take too long
  }
  return fig;
}

// Batched float32 products as attention makes them, per smallest dim d:
// scores [B, n, d] x [B, d, n] and context [B, n, n] x [B, n, d], n = 256,
// B sized to about 2^28 FLOP a product; the rate of the pair (both products'
// FLOP over both times) as a fraction of `peak`, the best square matmul's.
Expected<std::vector<std::pair<int64_t, double>>>
measureBatched(const Target &t, const Peers &peers, double peak, double budget) {
  constexpr int64_t kN = 256;
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t d : {16, 32, 64, 128, 256}) {
    int64_t batch = std::max<int64_t>(1, (int64_t(1) << 27) / (kN * kN * d));
    at::Tensor q = at::randn({batch, kN, d}, t.options(at::kFloat));
    at::Tensor k = at::randn({batch, d, kN}, t.options(at::kFloat));
    at::Tensor p = at::randn({batch, kN, kN}, t.options(at::kFloat));
    at::Tensor v = at::randn({batch, kN, d}, t.options(at::kFloat));
    at::bmm(q, k); // first touch
    at::bmm(p, v);
    t.sync();
    NNSC_RETURN_IF_ERROR(peers.barrier());
    double scores = medianInWindow(t, budget / 2, 3, [&] { at::bmm(q, k); });
    double context = medianInWindow(t, budget / 2, 3, [&] { at::bmm(p, v); });
    double flops = 2.0 * 2.0 * double(batch) * double(kN) * double(kN) * double(d);
    out.emplace_back(d, flops / (scores + context) / peak);
  }
  return out;
}

// Bytes read plus written per second by a copy of `bytes`.
Expected<double> measureCopy(const Target &t, const Peers &peers, int64_t bytes, double budget) {
  at::Tensor src = at::ones({bytes / 4}, t.options(at::kFloat));
  at::Tensor dst = at::empty_like(src);
  dst.copy_(src); // touch every page before timing
  t.sync();
  NNSC_RETURN_IF_ERROR(peers.barrier());
  return 2.0 * double(bytes) / medianInWindow(t, budget, 5, [&] { dst.copy_(src); });
}

// Random numbers per second as dropout draws them (bernoulli_ into a float
// tensor of 4 Mi elements): on a CPU each draw costs tens of instructions,
// far more than the bytes the op moves.
Expected<double> measureRandom(const Target &t, const Peers &peers, double budget) {
  constexpr int64_t kDraws = int64_t(1) << 22;
  at::Tensor mask = at::empty({kDraws}, t.options(at::kFloat));
  mask.bernoulli_(0.8); // touch every page before timing
  t.sync();
  NNSC_RETURN_IF_ERROR(peers.barrier());
  return double(kDraws) / medianInWindow(t, budget, 5, [&] { mask.bernoulli_(0.8); });
}

// Seconds per element of `op` forward and of its backward, on 2^22 float32
// elements shaped by `make` (grad mode on, as in training). The backward is
// timed as autograd runs it from a ready gradient, the graph kept between
// runs.
struct VectorTimes {
  double forward = 0, backward = 0;
};

template <typename Make, typename Op>
VectorTimes timeVector(const Target &t, double budget, Make make, Op op) {
  std::vector<at::Tensor> inputs = make();
  at::Tensor y = op(inputs);
  at::Tensor g = at::ones_like(y);
  std::vector<at::Tensor> needGrad;
  for (const at::Tensor &x : inputs)
    if (x.requires_grad())
      needGrad.push_back(x);
  VectorTimes v;
  v.forward = medianInWindow(t, budget, 3, [&] { op(inputs); });
  v.backward = medianInWindow(t, budget, 3, [&] {
    torch::autograd::grad({y}, needGrad, {g}, /*retain_graph=*/true);
  });
  return v;
}

// vector_ops (DeviceSpec::VectorCost): per kind, forward and backward
// seconds per element and per row. The row-wise kinds are timed at rows of
// 64 and of 1024 elements, the same elements in all, and the two figures
// solved for the per-element and the per-row part.
Expected<std::vector<std::pair<std::string, std::array<double, 4>>>>
measureVectorOps(const Target &t, const Peers &peers, double budget) {
  constexpr int64_t kN = int64_t(1) << 22;
  auto opts = t.options(at::kFloat);
  auto leaf = [&](std::vector<int64_t> shape) {
    return at::randn(shape, opts).set_requires_grad(true);
  };
  std::vector<std::pair<std::string, std::array<double, 4>>> out;
  auto flat = [&](const std::string &kind, auto op) {
    VectorTimes v = timeVector(t, budget / 2, [&] { return std::vector{leaf({kN})}; }, op);
    out.push_back({kind, {v.forward / kN, 0, v.backward / kN, 0}});
  };
  flat("exp", [](const std::vector<at::Tensor> &x) { return at::exp(x[0]); });
  flat("gelu", [](const std::vector<at::Tensor> &x) { return at::gelu(x[0]); });
  {
    constexpr int64_t kT = 256;
    at::Tensor mask = at::ones({kT, kT}, t.options(at::kFloat)).tril().eq(0);
    VectorTimes v = timeVector(
        t, budget / 2, [&] { return std::vector{leaf({kN / (kT * kT), 1, kT, kT})}; },
        [&](const std::vector<at::Tensor> &x) {
          return x[0].masked_fill(mask, -std::numeric_limits<float>::infinity());
        });
    out.push_back({"select", {v.forward / kN, 0, v.backward / kN, 0}});
  }
  auto rowwise = [&](const std::string &kind, auto make, auto op) {
    VectorTimes shortRows = timeVector(t, budget / 4, [&] { return make(64); }, op);
    VectorTimes longRows = timeVector(t, budget / 4, [&] { return make(1024); }, op);
    double rowsShort = double(kN) / 64, rowsLong = double(kN) / 1024;
    auto solve = [&](double tShort, double tLong) {
      double perRow = std::max(0.0, (tShort - tLong) / (rowsShort - rowsLong));
      double perElement = std::max(0.0, (tLong - rowsLong * perRow) / double(kN));
      return std::pair{perElement, perRow};
    };
    auto [fe, fr] = solve(shortRows.forward, longRows.forward);
    auto [be, br] = solve(shortRows.backward, longRows.backward);
    out.push_back({kind, {fe, fr, be, br}});
  };
  rowwise(
      "softmax", [&](int64_t len) { return std::vector{leaf({kN / len, len})}; },
      [](const std::vector<at::Tensor> &x) { return at::softmax(x[0], -1); });
  rowwise(
      "norm",
      [&](int64_t len) { return std::vector{leaf({kN / len, len}), leaf({len}), leaf({len})}; },
      [](const std::vector<at::Tensor> &x) {
        return at::layer_norm(x[0], {x[0].size(1)}, x[1], x[2]);
      });
  rowwise(
      "loss",
      [&](int64_t len) {
        at::Tensor target = at::randint(len, {kN / len}, t.options(at::kLong));
        return std::vector{leaf({kN / len, len}), target};
      },
      [](const std::vector<at::Tensor> &x) { return at::cross_entropy_loss(x[0], x[1]); });
  NNSC_RETURN_IF_ERROR(peers.barrier());
  return out;
}

// The runtime's AdamW update (rt::adamUpdate, what nnsc-run's optimizer runs)
// over 8 tensors of 2^19 float32 elements each (64 MiB of parameters, grads
// and states, past the caches as a model's are), as bytes per second at the
// step model's 80 bytes an element.
Expected<double> measureUpdate(const Target &t, const Peers &peers, double budget) {
  constexpr int64_t kElements = int64_t(1) << 19;
  constexpr int kTensors = 8;
  rt::OptimizerConfig config;
  config.name = "adamw";
  auto opts = t.options(at::kFloat);
  std::vector<at::Tensor> p, g, m, v;
  for (int i = 0; i < kTensors; ++i) {
    p.push_back(at::randn({kElements}, opts));
    g.push_back(at::randn({kElements}, opts));
    m.push_back(at::zeros({kElements}, opts));
    v.push_back(at::zeros({kElements}, opts));
  }
  double step = 0;
  auto update = [&] {
    step += 1;
    for (size_t i = 0; i < size_t(kTensors); ++i)
      rt::adamUpdate(config, p[i], g[i], m[i], v[i], step, 1e-4, 0.1, true);
  };
  update(); // first touch
  t.sync();
  NNSC_RETURN_IF_ERROR(peers.barrier());
  double seconds = medianInWindow(t, budget, 3, update);
  return 80.0 * double(kElements) * kTensors / seconds;
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

// Every worker's vector_ops figures replaced by the largest over workers.
Status slowest(rt::CommWorld *world, const Target &t,
               std::vector<std::pair<std::string, std::array<double, 4>>> &ops) {
  if (!world)
    return Status::ok();
  std::vector<double> values;
  for (const auto &op : ops)
    values.insert(values.end(), op.second.begin(), op.second.end());
  std::vector<at::Tensor> v = {at::tensor(values, at::TensorOptions(at::kDouble)).to(t.device)};
  NNSC_RETURN_IF_ERROR(world->world().allReduce(v, rt::ReduceOp::Max)->wait());
  at::Tensor host = v[0].cpu();
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t j = 0; j < 4; ++j)
      ops[i].second[j] = host[int64_t(i * 4 + j)].item<double>();
  return Status::ok();
}

struct Figures {
  std::vector<double> rates; ///< per plan.dtypes, then bandwidth, random draws/s, update B/s
  std::vector<std::pair<int64_t, double>> batched; ///< rank 0's, of its own float32 rate
  std::vector<std::pair<std::string, std::array<double, 4>>> vectorOps; ///< the slowest worker's
  double floor = 0;
  std::vector<std::string> notes;
};

Expected<Figures> measureAll(const DevicePlan &plan, const Target &t, rt::CommWorld *world,
                             const std::vector<int64_t> &sizes, int64_t copyBytes) {
  Peers peers{world, t.device};
  Figures f;
  for (const std::string &dtype : plan.dtypes) {
    // tf32: float32 matmuls with cuBLAS allowed the tensor cores' TF32, as nnsc-run's
    // precision.tf32 sets it; every other dtype measures with LibTorch's default, off, which
    // nothing else in this process changes. (Only the setter: newer PyTorch's getter
    // checks this legacy flag against its fp32_precision setting and can refuse a mix.)
    at::globalContext().setAllowTF32CuBLAS(dtype == "tf32");
    auto m = measureMatmul(t, peers, scalarType(dtype), sizes, plan.seconds);
    at::globalContext().setAllowTF32CuBLAS(false);
    if (!m)
      return m.status();
    f.rates.push_back(m->flops);
    f.notes.push_back(fmt::format("{}: {}", dtype, m->note));
  }
  // Batched products against float32's square rate (every spec has float32).
  auto f32 = std::find(plan.dtypes.begin(), plan.dtypes.end(), "float32");
  if (f32 != plan.dtypes.end() && f.rates[size_t(f32 - plan.dtypes.begin())] > 0) {
    auto batched =
        measureBatched(t, peers, f.rates[size_t(f32 - plan.dtypes.begin())], plan.seconds);
    if (!batched)
      return batched.status();
    f.batched = batched.take();
  }
  auto bandwidth = measureCopy(t, peers, copyBytes, plan.seconds);
  if (!bandwidth)
    return bandwidth.status();
  f.rates.push_back(*bandwidth);
  auto random = measureRandom(t, peers, plan.seconds);
  if (!random)
    return random.status();
  f.rates.push_back(*random);
  auto update = measureUpdate(t, peers, plan.seconds);
  if (!update)
    return update.status();
  f.rates.push_back(*update);
  auto vector = measureVectorOps(t, peers, plan.seconds);
  if (!vector)
    return vector.status();
  f.vectorOps = vector.take();
  NNSC_RETURN_IF_ERROR(slowest(world, t, f.vectorOps));
  NNSC_RETURN_IF_ERROR(peers.barrier());
  f.floor = measureFloor(t);
  NNSC_RETURN_IF_ERROR(agree(world, t, f.rates, f.floor));
  return f;
}

std::string threadCount(int threads) {
  return fmt::format("{} thread{}", threads, threads == 1 ? "" : "s");
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
    d.description = fmt::format("{}, {}{}", cpuModel(), threadCount(threads), perWorker);
    d.memoryBytes = memTotalBytes();
  }
  d.sources.push_back(fmt::format(
      "measured by nnsc-profile-device on {} {}: matmul n={}..{}, the median product in a {} s "
      "window per size, the best size; batched_matmul: bmm [B, 256, d] x [B, d, 256] and [B, 256, 256] x [B, 256, d] likewise, per d, of that rate; copy {} likewise; random_rate: bernoulli_ into 4 Mi "
      "floats likewise; update_bandwidth: the runtime's AdamW update over 8 x 512 Ki floats "
      "likewise, at 80 bytes an element; vector_ops: exp, gelu, masked_fill, and softmax, layer_norm, "
      "cross_entropy at rows of 64 and 1024, on 4 Mi floats, forward and autograd's backward, "
      "likewise; launch floor = median of 21 x 200 one-element adds; {}{}",
      hostName(), isoDateTime(), sizes.front(), sizes.back(), plan.seconds, formatBytes(copyBytes),
      threadCount(threads), perWorker));
  for (size_t i = 0; i < plan.dtypes.size(); ++i)
    if (f.rates[i] > 0)
      d.flops.emplace_back(plan.dtypes[i], f.rates[i]);
  d.memoryBandwidth = f.rates[f.rates.size() - 3];
  d.randomRate = f.rates[f.rates.size() - 2];
  d.updateBandwidth = f.rates.back();
  d.launchFloor = f.floor;
  d.batchedMatmul = f.batched;
  d.vectorOps = f.vectorOps;
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
                       f->rates[i] > 0 ? formatReal(f->rates[i]) : "-",
                       f->notes[i].substr(plan.dtypes[i].size() + 2));
  if (!d.batchedMatmul.empty()) {
    std::string fractions;
    for (const auto &[dim, fraction] : d.batchedMatmul)
      fractions += fmt::format("{}{}: {:.2f}", fractions.empty() ? "" : ", ", dim, fraction);
    out << fmt::format("batched matmul (smallest dim: of the float32 rate) {}\n", fractions);
  }
  out << fmt::format("memory bandwidth {} B/s, AdamW update {} B/s, random {} draws/s, launch "
                     "floor {} s, memory {:.1f} GiB\n",
                     formatReal(d.memoryBandwidth), formatReal(d.updateBandwidth),
                     formatReal(d.randomRate),
                     formatReal(d.launchFloor),
                     double(d.memoryBytes) / double(int64_t(1) << 30));
  out << fmt::format("nnsc-profile-device: wrote {} ({}, {}{}) in {:.1f} s\n", plan.out, d.name,
                     threadCount(threads),
                     env.worldSize > 1 ? fmt::format(" x {} workers", env.worldSize) : "",
                     since(start));
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
  Target t;
  if (plan.device == "cuda") {
    if (!torch::cuda::is_available())
      return errorf("--device cuda: this LibTorch sees no CUDA device");
    t.device = at::Device(at::kCUDA, env.localRank);
  } else {
    out << rt::bindLocalWorkerOrWarn("nnsc-profile-device", env.rank, env.localRank,
                                     env.localWorldSize);
  }
  rt::setIntraOpThreads(threads);
  try {
    return measureAndWrite(plan, env, t, threads, out);
  } catch (const std::exception &e) {
    std::string what = e.what();
    return Status::internal(fmt::format("nnsc-profile-device: error: rank {}: {}", env.rank,
                                        what.substr(0, what.find('\n'))));
  }
}

} // namespace nnsc::profile
