// The worker of nnsc-profile-comm: times each collective with the runtime's
// own backends (Runtime/Comm.h), agrees on the figures and writes the table.
//
// Groups of a size are consecutive ranks ([0,g), [g,2g), ...) and all of them
// run at once, as a plan's groups of that size do. A point is timed after a
// barrier of its group so that one rank's lateness is not counted; its time is
// the median of a rank's iterations, and the table holds the largest median
// over the ranks (an allreduce MAX), the time a step waits for.
#include <algorithm>
#include <chrono>
#include <map>
#include <numeric>
#include <ostream>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "CommBench.h"
#include "IdleSpinner.h"
#include "nnsc/Profile/HostInfo.h"
#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/CpuBinding.h"
#include "nnsc/Support/File.h"

namespace nnsc::profile {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One rank's buffers for one point; which fields are used depends on the
// collective.
struct Buffers {
  std::vector<at::Tensor> whole; ///< all_reduce, broadcast
  at::Tensor input, output;      ///< all_gather's input, reduce_scatter's output, ...
  std::vector<at::Tensor> parts; ///< all_gather's outputs, reduce_scatter's inputs
};

Buffers makeBuffers(Collective c, int64_t elements, int group, at::Device device) {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  int64_t part = elements / group;
  Buffers b;
  switch (c) {
  case Collective::AllReduce:
  case Collective::Broadcast:
    b.whole = {at::ones({elements}, opts)};
    break;
  case Collective::AllGather:
    b.input = at::ones({part}, opts);
    for (int i = 0; i < group; ++i)
      b.parts.push_back(at::empty({part}, opts));
    break;
  case Collective::ReduceScatter:
    for (int i = 0; i < group; ++i)
      b.parts.push_back(at::ones({part}, opts));
    b.output = at::empty({part}, opts);
    break;
  case Collective::AllToAll:
    b.input = at::ones({elements}, opts);
    b.output = at::empty({elements}, opts);
    break;
  case Collective::SendRecv:
    b.input = at::ones({elements}, opts);
    b.output = at::empty({elements}, opts);
    break;
  }
  return b;
}

// A round trip between group ranks 2i and 2i+1: the even rank posts its
// receive, sends and waits for the answer; the odd one answers.
Status pingPong(rt::CommBackend &g, Buffers &b) {
  int peer = g.rank() ^ 1;
  if (peer >= g.size())
    return Status::ok(); // the odd one out of an odd group
  if (g.rank() % 2 == 0) {
    rt::WorkPtr answer = g.recv(b.output, peer);
    NNSC_RETURN_IF_ERROR(g.send(b.input, peer)->wait());
    return answer->wait();
  }
  NNSC_RETURN_IF_ERROR(g.recv(b.output, peer)->wait());
  return g.send(b.input, peer)->wait();
}

// One operation, finished on the device too.
Status runOnce(rt::CommBackend &g, Collective c, Buffers &b, at::Device device) {
  Status st;
  switch (c) {
  case Collective::AllReduce:
    st = g.allReduce(b.whole)->wait();
    break;
  case Collective::AllGather:
    st = g.allGather(b.input, b.parts)->wait();
    break;
  case Collective::ReduceScatter:
    st = g.reduceScatter(b.parts, b.output)->wait();
    break;
  case Collective::AllToAll:
    st = g.allToAll(b.input, b.output)->wait();
    break;
  case Collective::Broadcast:
    st = g.broadcast(b.whole, 0)->wait();
    break;
  case Collective::SendRecv:
    st = pingPong(g, b);
    break;
  }
  if (st && device.is_cuda())
    torch::cuda::synchronize(device.index());
  return st;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The group's largest value of `x` (every member calls it).
Expected<double> groupMax(rt::CommBackend &g, double x, at::Device device) {
  std::vector<at::Tensor> t = {at::full({1}, x, at::TensorOptions(at::kDouble).device(device))};
  NNSC_RETURN_IF_ERROR(g.allReduce(t, rt::ReduceOp::Max)->wait());
  return t[0].cpu().item<double>();
}

// How one round times a point.
struct RoundPlan {
  int warmup = 1, iters = 7, minIters = 2;
  double budget = 0.2; ///< seconds; fewer iterations (not below minIters) beyond it
};

RoundPlan roundPlan(const CommPlan &plan, int round) {
  RoundPlan r;
  r.warmup = round == 0 ? plan.warmup : std::min(plan.warmup, 1);
  r.iters = (plan.iters + plan.rounds - 1) / plan.rounds;
  r.minIters = std::min(r.iters, (kMinTimedIters + plan.rounds - 1) / plan.rounds);
  r.budget = plan.pointSeconds / plan.rounds;
  return r;
}

// `ms` milliseconds of square matmuls of 256 on `device`, finished there:
// the compute a step runs between two of its collectives.
void computeFor(double ms, at::Device device) {
  if (ms <= 0)
    return;
  at::NoGradGuard noGrad;
  at::Tensor a = at::ones({256, 256}, at::TensorOptions(at::kFloat).device(device));
  auto start = Clock::now();
  while (since(start) * 1e3 < ms) {
    at::Tensor product = at::mm(a, a);
    if (device.is_cuda())
      torch::cuda::synchronize(device.index());
  }
}

// This rank's figure over the round's timed iterations, after its warmup
// (fewer iterations when the group's slowest warmup iteration says they would
// overrun the budget): the median back to back, the mean with a gap of
// compute before each (CommPlan::gapMs).
Expected<double> timePoint(rt::CommBackend &g, const RoundPlan &r, Collective c, int64_t elements,
                           at::Device device, double gapMs) {
  Buffers b = makeBuffers(c, elements, g.size(), device);
  double slowest = 0;
  for (int i = 0; i < r.warmup; ++i) {
    auto t0 = Clock::now();
    NNSC_RETURN_IF_ERROR(runOnce(g, c, b, device));
    slowest = std::max(slowest, since(t0));
  }
  int iters = r.iters;
  if (r.warmup > 0) {
    auto agreed = groupMax(g, slowest, device); // every member must run the same count
    if (!agreed)
      return agreed.status();
    if (*agreed * iters > r.budget)
      iters = std::clamp(int(r.budget / *agreed), r.minIters, iters);
  }
  std::vector<double> times;
  NNSC_RETURN_IF_ERROR(g.barrier()->wait());
  for (int i = 0; i < iters; ++i) {
    computeFor(gapMs, device);
    auto t0 = Clock::now();
    NNSC_RETURN_IF_ERROR(runOnce(g, c, b, device));
    double t = since(t0);
    times.push_back(c == Collective::SendRecv ? t / 2 : t); // one way of the round trip
  }
  if (gapMs > 0)
    return std::accumulate(times.begin(), times.end(), 0.0) / double(times.size());
  return median(times);
}

// Every rank's host name, by global rank, through the rendezvous store.
std::vector<std::string> exchangeHosts(rt::CommWorld &world) {
  const auto &store = world.store();
  std::string mine = hostName();
  store->set(fmt::format("nnsc/profile-comm/host/{}", world.rank()),
             std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> hosts;
  for (int r = 0; r < world.size(); ++r) {
    std::vector<uint8_t> v = store->get(fmt::format("nnsc/profile-comm/host/{}", r));
    hosts.emplace_back(v.begin(), v.end());
  }
  return hosts;
}

// The groups of each size: this rank's backend (nullptr when it sits out)
// and the placement of the size ("inter" when any group spans hosts).
struct SizedGroups {
  std::map<int, std::shared_ptr<rt::CommBackend>> mine;
  std::map<int, std::string> placement;
};

Expected<SizedGroups> makeGroups(rt::CommWorld &world, const std::vector<std::string> &hosts) {
  SizedGroups out;
  std::vector<rt::GroupSpec> specs;
  std::map<int, int> myGroupId; // size -> id
  for (int g : groupSizes(world.size())) {
    bool inter = false;
    for (int first = 0; first + g <= world.size(); first += g) {
      rt::GroupSpec spec{int(specs.size()), {}};
      for (int r = first; r < first + g; ++r) {
        spec.ranks.push_back(r);
        inter |= hosts[r] != hosts[first];
      }
      if (world.rank() >= first && world.rank() < first + g)
        myGroupId[g] = spec.id;
      if (g < world.size())
        specs.push_back(spec);
    }
    out.placement[g] = inter ? "inter" : "intra";
  }
  NNSC_RETURN_IF_ERROR(world.addGroups(specs));
  for (int g : groupSizes(world.size())) {
    if (g == world.size())
      out.mine[g] = world.group(rt::kWorldGroup);
    else
      out.mine[g] = myGroupId.count(g) ? world.group(myGroupId[g]) : nullptr;
  }
  return out;
}

// What the table records for a requested size on a group: the bytes of the
// buffer actually used (nccl-tests' "size"), without repeats.
std::vector<int64_t> elementLadder(const std::vector<int64_t> &sizes, int group) {
  std::vector<int64_t> out;
  for (int64_t bytes : sizes) {
    int64_t n = messageElements(bytes, group);
    if (out.empty() || n > out.back())
      out.push_back(n);
  }
  return out;
}

struct Point {
  Collective collective;
  int group;
  int64_t elements;
};

// Every point this plan measures, in the same order on every rank.
std::vector<Point> pointsOf(const CommPlan &plan, int worldSize) {
  std::vector<Point> points;
  for (Collective c : plan.collectives)
    for (int g : groupSizes(worldSize)) {
      if (c == Collective::SendRecv && g != 2)
        continue; // point to point is a pair
      for (int64_t n : elementLadder(plan.sizes, g))
        points.push_back({c, g, n});
    }
  return points;
}

CommTable buildTable(const CommPlan &plan, const std::vector<Point> &points,
                     const std::vector<double> &seconds, const SizedGroups &groups, int worldSize) {
  CommTable table;
  table.backend = plan.backend;
  table.device = plan.device;
  RoundPlan r = roundPlan(plan, 0);
  table.sources.push_back(fmt::format(
      "measured by nnsc-profile-comm on {}, {} processes, {}, {}, {} of {} iters after {} "
      "warmup, in {} rounds of {} (fewer, at least {}, where a round of a point would pass {} "
      "s), the {} round; max over ranks; groups of consecutive ranks, all groups of a size "
      "at once{}{}",
      hostName(), worldSize, plan.backend, isoDateTime(), plan.gapMs > 0 ? "mean" : "median",
      r.iters * plan.rounds, plan.warmup, plan.rounds, r.iters, r.minIters, r.budget,
      plan.gapMs > 0 ? "median" : "fastest", plan.spin ? "; CPUs kept awake" : "",
      plan.gapMs > 0 ? fmt::format("; {} ms of matmuls before each timed operation", plan.gapMs)
                     : std::string()));
  for (size_t i = 0; i < points.size(); ++i) {
    const Point &p = points[i];
    const char *name = collectiveName(p.collective);
    if (table.curves.empty() || table.curves.back().collective != name ||
        table.curves.back().group != p.group)
      table.curves.push_back({name, p.group, groups.placement.at(p.group), {}});
    table.curves.back().points.emplace_back(p.elements * 4, seconds[i]);
  }
  return table;
}

void printSummary(const CommTable &table, std::ostream &out) {
  for (const CommCurve &c : table.curves) {
    const auto &[lastBytes, lastSeconds] = c.points.back();
    out << fmt::format("{:<15} {:>3} ranks {}: {} {} s .. {} {} s ({:.2f} GB/s at the largest)\n",
                       c.collective, c.group, c.placement, formatBytes(c.points.front().first),
                       formatReal(c.points.front().second), formatBytes(lastBytes),
                       formatReal(lastSeconds), lastBytes / lastSeconds / 1e9);
  }
}

// One sweep over every point; seconds[i] is this rank's median of point i
// (0 where it sits out).
Status sweep(const CommPlan &plan, int round, rt::CommWorld &world, const SizedGroups &groups,
             const std::vector<Point> &points, at::Device device, double *seconds) {
  RoundPlan r = roundPlan(plan, round);
  for (size_t i = 0; i < points.size(); ++i) {
    const Point &p = points[i];
    if (i == 0 || p.collective != points[i - 1].collective || p.group != points[i - 1].group)
      NNSC_RETURN_IF_ERROR(world.world().barrier()->wait()); // idle ranks wait here
    if (auto g = groups.mine.at(p.group)) {
      auto t = timePoint(*g, r, p.collective, p.elements, device, plan.gapMs);
      if (!t)
        return t.status();
      seconds[i] = *t;
    }
  }
  return Status::ok();
}

// The rounds' figures agreed over ranks (each round's largest), then per
// point the smallest round (back to back: a round the machine disturbed
// counts least) or, with a gap, the median round (the mean of a round has
// its tail in it, which steps pay; one disturbed round is left out).
Expected<std::vector<double>> measureRounds(const CommPlan &plan, rt::CommWorld &world,
                                            const SizedGroups &groups,
                                            const std::vector<Point> &points, at::Device device) {
  size_t n = points.size();
  std::vector<double> rounds(n * size_t(plan.rounds), 0.0);
  for (int r = 0; r < plan.rounds; ++r)
    NNSC_RETURN_IF_ERROR(sweep(plan, r, world, groups, points, device, &rounds[size_t(r) * n]));
  std::vector<at::Tensor> agreed = {at::tensor(rounds, at::TensorOptions(at::kDouble)).to(device)};
  NNSC_RETURN_IF_ERROR(world.world().allReduce(agreed, rt::ReduceOp::Max)->wait());
  at::Tensor byRound = agreed[0].cpu().view({plan.rounds, int64_t(n)});
  // (lower median over an even count of rounds)
  at::Tensor host = plan.gapMs > 0 ? std::get<0>(byRound.median(0)) : byRound.amin(0);
  std::vector<double> seconds(n);
  for (size_t i = 0; i < n; ++i)
    seconds[i] = host[int64_t(i)].item<double>();
  return seconds;
}

Status measureAndWrite(const CommPlan &plan, rt::CommWorld &world, at::Device device,
                       std::ostream &out, Clock::time_point start) {
  auto groups = makeGroups(world, exchangeHosts(world));
  if (!groups)
    return groups.status();
  std::vector<Point> points = pointsOf(plan, world.size());
  auto seconds = measureRounds(plan, world, *groups, points, device);
  if (!seconds)
    return seconds.status();
  if (world.rank() != 0)
    return Status::ok();
  CommTable table = buildTable(plan, points, *seconds, *groups, world.size());
  NNSC_RETURN_IF_ERROR(writeFileAtomic(plan.out, formatCommTable(table)));
  printSummary(table, out);
  out << fmt::format("nnsc-profile-comm: wrote {} ({} curves, {} points) in {:.1f} s\n", plan.out,
                     table.curves.size(), points.size(), since(start));
  return Status::ok();
}

} // namespace

Status runCommWorker(const CommPlan &plan, const rt::LaunchEnv &env, std::ostream &out) {
  auto start = Clock::now();
  if (plan.backend == "gloo") // as nnsc-run places its CPU workers (cpu_bind: cores)
    out << rt::bindLocalWorkerOrWarn("nnsc-profile-comm", env.rank, env.localRank,
                                     env.localWorldSize);
  IdleSpinner awake(plan.spin);
  if (env.rank == 0)
    NNSC_RETURN_IF_ERROR(checkWritable(plan.out));
  rt::CommOptions options;
  options.backend = plan.backend;
  options.timeout = plan.timeout;
  at::Device device =
      plan.backend == "nccl" ? at::Device(at::kCUDA, env.localRank) : at::Device(at::kCPU);
  auto world = rt::CommWorld::create(env, options);
  if (!world)
    return world.status();
  try {
    return measureAndWrite(plan, **world, device, out, start);
  } catch (const std::exception &e) {
    std::string what = e.what();
    return Status::internal(fmt::format("nnsc-profile-comm: error: rank {}: {}", env.rank,
                                        what.substr(0, what.find('\n'))));
  }
}

} // namespace nnsc::profile
