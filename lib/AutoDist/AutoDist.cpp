// autodist's outer search: configurations, solves, exact pricing (AutoDist.h).
#include "nnsc/AutoDist/AutoDist.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "Internal.h"
#include "Problem.h"
#include "Repeats.h"
#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Plan/PlanPrinter.h"
#include "nnsc/Plan/Recompute.h"
#include "nnsc/Search/Repeated.h"
#include "nnsc/Search/Solver.h"
#include "nnsc/Transform/Partition.h"
#include "nnsc/Transform/StepCost.h"

namespace nnsc::autodist {

bool takePriced(Outcome &out, proto::Plan plan, const Priced &priced, double limit) {
  Trial &t = out.trial;
  t.stepSeconds = priced.step;
  t.memoryBytes = priced.memory;
  t.bubbleSeconds = priced.bubble;
  out.plan = std::move(plan);
  t.fits = priced.memory <= limit;
  t.why = t.fits ? "" : "the plan found needs " + plan::formatBytes(priced.memory) + " per device";
  return t.fits;
}

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Recompute groups per node for the given selectors (none: all -1).
Expected<std::vector<int>> recomputeGroups(const ir::Graph &graph,
                                           const std::vector<plan::RecomputeSelector> &selectors) {
  std::vector<int> groups(graph.nodes().size(), -1);
  if (selectors.empty())
    return groups;
  proto::Plan scratch;
  for (const ir::Node &node : graph.nodes())
    *scratch.add_nodes() = plan::replicateNode(node, {0}, "autodist");
  NNSC_RETURN_IF_ERROR(plan::assignRecomputeGroups(graph, selectors, scratch));
  for (int k = 0; k < scratch.nodes_size(); ++k)
    groups[static_cast<size_t>(k)] = scratch.nodes(k).recompute_group();
  return groups;
}

std::vector<plan::RecomputeSelector> instancesSelector(const std::vector<std::string> &paths) {
  if (paths.empty())
    return {};
  plan::RecomputeSelector sel;
  sel.kind = plan::RecomputeSelector::ModulePath;
  sel.patterns = paths;
  return {sel};
}

std::vector<plan::RecomputeSelector> recomputeSelectors(const Options &options,
                                                        const std::vector<std::string> &instances) {
  if (options.recompute != Options::Recompute::Modules)
    return instancesSelector(instances);
  plan::RecomputeSelector named;
  named.kind = plan::RecomputeSelector::ModuleClass;
  named.patterns = options.recomputeModules;
  return {named};
}

Expected<search::Solution> solveFoldable(const search::Problem &p, const std::vector<int> &rep,
                                         const Options &options, bool &folded) {
  search::DpLimits limits;
  limits.maxParetoPoints = options.paretoPoints;
  folded = !rep.empty();
  auto start = std::chrono::steady_clock::now();
  auto sol = folded ? search::solveRepeated(p, rep, limits) : search::solveDp(p, limits);
  if (!sol && folded && sol.status().message().find("fixings") != std::string::npos) {
    folded = false; // too many ways into the next layer: solve every layer
    start = std::chrono::steady_clock::now();
    sol = search::solveDp(p, limits);
  }
  if (IlpCheck *check = options.ilpCheck.get()) {
    if (folded) {
      ++check->folded;
      return sol;
    }
    auto mid = std::chrono::steady_clock::now();
    auto ilp = search::solveIlp(p);
    auto end = std::chrono::steady_clock::now();
    check->dpSeconds += std::chrono::duration<double>(mid - start).count();
    check->ilpSeconds += std::chrono::duration<double>(end - mid).count();
    if (sol.isOk() != ilp.isOk()) {
      check->failures.push_back(fmt::format(
          "{} nodes: dynamic program {}, CBC {}", p.nodes.size(),
          sol ? fmt::format("{:.6g} s", sol->time) : sol.status().message(),
          ilp ? fmt::format("{:.6g} s", ilp->time) : ilp.status().message()));
    } else if (sol) {
      ++check->problems;
      double rel = (sol->time - ilp->time) / std::max(std::abs(ilp->time), 1e-300);
      check->worst = std::max(check->worst, rel);
      if (std::abs(rel) <= 1e-9)
        ++check->agree;
    }
  }
  return sol;
}

int microBatchesFor(const Options &options, int dp) {
  if (options.globalBatch <= 0)
    return options.microBatches;
  return options.globalBatch % dp == 0 ? options.globalBatch / dp : 0;
}

const OpOption &chosenOption(const Built &built, const std::vector<int> &choice, size_t k) {
  int decision = built.decisionOf[k];
  return built.options[k][static_cast<size_t>(
      built.optionOf[k][static_cast<size_t>(choice[static_cast<size_t>(decision)])])];
}

Expected<proto::Plan> materialize(const ir::Graph &graph, const PlanShape &shape,
                                  const std::function<const OpOption &(size_t)> &optionOf,
                                  const std::vector<int> &recomputeGroup) {
  proto::Plan plan;
  plan.set_format_version(plan::kPlanFormatVersion);
  plan.set_policy("autodist");
  plan.set_plan_ngpus(shape.planNgpus);
  plan.set_runtime_ngpus(shape.runtimeNgpus);
  plan.set_micro_batches(shape.microBatches);
  plan.set_zero(shape.zero);
  if (shape.zeroNgroups > 1)
    plan.set_zero_ngroups(shape.zeroNgroups);
  proto::Stage *stage = plan.add_stages();
  stage->set_id(0);
  std::vector<int> devices = plan::firstDevices(shape.planNgpus);
  for (int d : devices)
    stage->add_devices(d);
  for (size_t k = 0; k < graph.nodes().size(); ++k) {
    const ir::Node &node = graph.nodes()[k];
    const OpOption &o = optionOf(k);
    proto::NodePlan np = plan::replicateNode(node, devices, "autodist");
    if (!o.ident.empty()) {
      auto split =
          plan::splitNodeByIdent(graph, node, o.ident, devices, "autodist", o.interleave);
      if (!split)
        return split.status();
      np = split.take();
    }
    if (!recomputeGroup.empty())
      np.set_recompute_group(recomputeGroup[k]);
    *plan.add_nodes() = std::move(np);
  }
  return plan;
}

// The largest product of option counts over the nodes that are alive
// between two positions (the dynamic program's frontier).
int64_t largestFrontier(const search::Problem &p) {
  std::vector<int> lastUse(p.nodes.size());
  for (size_t k = 0; k < p.nodes.size(); ++k)
    lastUse[k] = static_cast<int>(k);
  for (const search::Edge &e : p.edges)
    lastUse[static_cast<size_t>(e.from)] = std::max(lastUse[static_cast<size_t>(e.from)], e.to);
  int64_t largest = 1;
  std::vector<int> alive;
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    alive.push_back(static_cast<int>(k));
    alive.erase(std::remove_if(alive.begin(), alive.end(),
                               [&](int a) { return lastUse[static_cast<size_t>(a)] <= static_cast<int>(k); }),
                alive.end());
    int64_t states = 1;
    for (int a : alive)
      states = std::min<int64_t>(states * static_cast<int64_t>(p.nodes[static_cast<size_t>(a)].size()),
                                 int64_t{1} << 40);
    largest = std::max(largest, states);
  }
  return largest;
}

namespace {

// "2 device(s) per copy", or per pipeline stage.
std::string where(const Trial &t) {
  return t.stages > 1 ? fmt::format("{} pipeline stages of {} device(s)", t.stages, t.planNgpus)
                      : fmt::format("{} device(s) per copy", t.planNgpus);
}

std::vector<plan::RecomputeSelector> firstInstances(const RepeatedBlocks &blocks, int count) {
  std::vector<std::string> paths;
  for (int i = 0; i < count && i < static_cast<int>(blocks.paths.size()); ++i)
    paths.push_back(blocks.paths[static_cast<size_t>(i)]);
  return instancesSelector(paths);
}

// The constrained op whose rules raise its smallest option the most, for
// the message when nothing fits: "" when no constraint costs memory.
std::string constraintNote(const ir::Graph &graph, const Built &built, const Options &options) {
  if (!options.constraints || built.constraintRaise.empty())
    return "";
  auto most = std::max_element(built.constraintRaise.begin(), built.constraintRaise.end());
  if (*most <= 0)
    return "";
  size_t k = static_cast<size_t>(most - built.constraintRaise.begin());
  return fmt::format("{} keeps {} {} above its smallest option", options.constraints->path,
                     plan::describeNode(graph.nodes()[k]), plan::formatBytes(*most));
}

// A configuration's problem built on a probe (Probes.h): the graph cut to
// three instances of each run of alike layers (recomputed or not; fewer
// where the run is shorter), the middle one's prices counted once for every
// instance of the run between its first and last. The first and last keep
// their own: what comes before and after them differs. Folded (every
// instance cut alike, Search/Repeated.h), it is the whole problem's folded
// problem, for a build that does not grow with depth.
struct ProblemProbe {
  const ir::Graph *graph = nullptr; ///< the cut graph (owned by the cache)
  Setting setting;                  ///< over its nodes
  std::vector<size_t> nodeOf;       ///< per node of the whole graph: the probe node for it
  std::vector<std::pair<size_t, size_t>> ranges; ///< its instances
  std::vector<double> weight;                    ///< per probe instance: instances it stands for
};

std::optional<ProblemProbe> problemProbe(const ir::Graph &graph, const Options &options,
                                         const Setting &setting, RelayoutCache &cache) {
  const auto &ranges = cache.layerRanges(graph);
  if (!options.foldRepeats || options.wholeGraph || setting.constraints ||
      !setting.inStage.empty() || !setting.replicateOnly.empty() || ranges.size() < 4)
    return std::nullopt;
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first != ranges[i - 1].second)
      return std::nullopt; // ops between the layers
  const std::vector<int> &groups = setting.recomputeGroup;
  auto groupAt = [&](size_t k) { return groups.empty() ? -1 : groups[k]; };
  // Runs of instances alike in recompute; each instance's group its own.
  std::vector<bool> recomputed;
  for (const auto &[begin, end] : ranges) {
    int g = groupAt(begin);
    for (size_t k = begin; k < end; ++k)
      if (groupAt(k) != g)
        return std::nullopt;
    recomputed.push_back(g >= 0);
  }
  for (size_t k = 0; k < graph.nodes().size(); ++k)
    if (groupAt(k) >= 0 && (k < ranges.front().first || k >= ranges.back().second))
      return std::nullopt; // a group outside the layers
  std::set<int> seen;
  for (const auto &r : ranges)
    if (groupAt(r.first) >= 0 && !seen.insert(groupAt(r.first)).second)
      return std::nullopt; // a group over several layers
  ProblemProbe p;
  std::vector<size_t> slotOf(ranges.size());
  for (size_t i = 0; i < ranges.size();) {
    size_t j = i;
    while (j < ranges.size() && recomputed[j] == recomputed[i])
      ++j;
    const size_t length = j - i, first = p.weight.size();
    for (size_t q = 0; q < std::min<size_t>(length, 3); ++q)
      p.weight.push_back(q == 1 && length > 3 ? static_cast<double>(length - 2) : 1.0);
    for (size_t q = 0; q < length; ++q)
      slotOf[i + q] = first + (length <= 3 ? q : q == 0 ? 0 : q == length - 1 ? 2 : 1);
    i = j;
  }
  const size_t slots = p.weight.size();
  if (slots >= ranges.size())
    return std::nullopt;
  const Probe &probe = cache.truncated(graph, slots);
  p.graph = &probe.graph;
  p.ranges.assign(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(slots));
  const size_t shift = ranges.back().second - p.ranges.back().second;
  p.nodeOf.resize(graph.nodes().size());
  for (size_t k = 0; k < graph.nodes().size(); ++k)
    if (k < ranges.front().first)
      p.nodeOf[k] = k;
    else if (k >= ranges.back().second)
      p.nodeOf[k] = k - shift;
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t k = ranges[i].first; k < ranges[i].second; ++k)
      p.nodeOf[k] = p.ranges[slotOf[i]].first + (k - ranges[i].first);
  p.setting = setting;
  p.setting.recomputeGroup.assign(probe.graph.nodes().size(), -1);
  p.setting.weight.assign(probe.graph.nodes().size(), 1.0);
  for (size_t s = 0; s < slots; ++s)
    for (size_t k = p.ranges[s].first; k < p.ranges[s].second; ++k)
      p.setting.weight[k] = p.weight[s];
  for (size_t s = 0; s < slots; ++s)
    for (size_t i = 0; i < ranges.size(); ++i)
      if (slotOf[i] == s) {
        if (recomputed[i])
          for (size_t k = p.ranges[s].first; k < p.ranges[s].second; ++k)
            p.setting.recomputeGroup[k] = static_cast<int>(s);
        break;
      }
  return p;
}

// Decisions with a choice, each counted for the instances it stands for
// (by its first op): the whole problem's count.
int weighedDecisions(const Built &built, const std::vector<double> &weight) {
  std::vector<double> of(built.problem.nodes.size(), 0.0);
  for (size_t k = 0; k < built.decisionOf.size(); ++k) {
    double &w = of[static_cast<size_t>(built.decisionOf[k])];
    if (w == 0)
      w = weight[k];
  }
  double decisions = 0;
  for (size_t d = 0; d < of.size(); ++d)
    if (built.problem.nodes[d].size() > 1)
      decisions += of[d];
  return static_cast<int>(decisions);
}

// Searches one configuration: solve, price exactly, and where the exact
// memory passes the limit solve again under a limit lowered by the excess.
Outcome solveSetting(const ir::Graph &graph, const cost::Cluster &cluster, const Options &options,
                     const Setting &setting, double limit, RelayoutCache &cache,
                     const RepeatedBlocks &blocks, bool probed = true) {
  auto t0 = Clock::now();
  std::optional<ProblemProbe> probe;
  if (probed)
    probe = problemProbe(graph, options, setting, cache);
  // The graph the problem is built on, and the node of it for each node.
  const ir::Graph &built_on = probe ? *probe->graph : graph;
  auto nodeFor = [&](size_t k) { return probe ? probe->nodeOf[k] : k; };
  Outcome out;
  Trial &t = out.trial;
  t.planNgpus = setting.planNgpus;
  t.dp = setting.dp;
  t.zero = setting.zero;
  t.source = "search";
  for (int g : setting.recomputeGroup)
    t.recomputeLayers = std::max(t.recomputeLayers, g + 1);
  Built built = buildProblem(built_on, cluster, options, probe ? probe->setting : setting, cache);
  if (probe)
    built.decisions = weighedDecisions(built, probe->setting.weight);
  t.decisions = built.decisions;
  t.states = largestFrontier(built.problem);
  t.ops = static_cast<int>(graph.nodes().size());
  if (!built.infeasible.empty()) {
    t.why = built.infeasible;
    t.searchSeconds = secondsSince(t0);
    return out;
  }
  t.constraintNote = constraintNote(graph, built, options);
  if (std::getenv("NNSC_AUTODIST_DEBUG")) {
    std::vector<int> lastUse(built.problem.nodes.size());
    for (size_t k = 0; k < lastUse.size(); ++k)
      lastUse[k] = static_cast<int>(k);
    for (const search::Edge &e : built.problem.edges)
      lastUse[static_cast<size_t>(e.from)] = std::max(lastUse[static_cast<size_t>(e.from)], e.to);
    for (size_t k = 0; k < lastUse.size(); ++k)
      if (lastUse[k] > static_cast<int>(k) + 40 && built.problem.nodes[k].size() > 1)
      {
        std::string m;
        for (size_t q = 0; q < built.decisionOf.size(); ++q)
          if (built.decisionOf[q] == static_cast<int>(k))
            m += " " + std::to_string(q) + ":" + built_on.nodes()[q].op.substr(6);
        std::fprintf(stderr, "long-lived %s: %zu options, last use %d (%s)\n",
                     built.problem.nodeNames[k].c_str(), built.problem.nodes[k].size(), lastUse[k],
                     built.problem.nodeNames[static_cast<size_t>(lastUse[k])].c_str());
        std::fprintf(stderr, "  members%s\n", m.substr(0, 600).c_str());
      }
    std::fprintf(stderr, "T=%d nodes %zu%s decisions %d frontier %lld, %lld re-layout searches\n",
                 setting.planNgpus, built.problem.nodes.size(), probe ? " (probe)" : "",
                 built.decisions,
                 static_cast<long long>(t.states), static_cast<long long>(cache.searches()));
  }
  // Layers alike are solved once: every instance takes the first's options.
  std::vector<int> rep;
  if (options.foldRepeats)
    rep = representatives(built, probe ? probe->ranges : cache.layerRanges(graph));
  t.folded = !rep.empty();
  if (probe && !t.folded) // the probe stands for the whole only folded
    return solveSetting(graph, cluster, options, setting, limit, cache, blocks, false);
  double dpLimit = limit;
  // Folded, only uniform assignments count: the least is theirs (and the
  // same on a probe as on the whole graph).
  double least = search::leastMemory(built.problem);
  if (t.folded)
    if (auto folded = search::leastMemoryRepeated(built.problem, rep))
      least = *folded;
  out.leastBytes = least;
  for (int attempt = 0; attempt < 4; ++attempt) {
    built.problem.memoryLimit = dpLimit;
    if (least > dpLimit) {
      t.why = "needs at least " + plan::formatBytes(least + (limit - dpLimit)) + " per device";
      t.memoryBytes = least + (limit - dpLimit);
      break;
    }
    auto tSolve = Clock::now();
    auto sol = solveFoldable(built.problem, rep, options, t.folded);
    if (probe && !t.folded)
      return solveSetting(graph, cluster, options, setting, limit, cache, blocks, false);
    if (!t.folded && !rep.empty()) { // solved whole: any assignment counts
      rep.clear();
      least = search::leastMemory(built.problem);
      out.leastBytes = least;
    }
    if (std::getenv("NNSC_AUTODIST_DEBUG"))
      std::fprintf(stderr, "least %.6g dpLimit %.6g build %.2f s, solve %.2f s, objective %.6g s, memory %.6g\n", least, dpLimit,
                   std::chrono::duration<double>(tSolve - t0).count(), secondsSince(tSolve),
                   sol ? sol->time : -1.0, sol ? sol->memory : -1.0);
    if (!sol) {
      t.why = sol.status().message();
      break;
    }
    PlanShape shape{setting.planNgpus, options.runtimeNgpus, setting.microBatches, setting.zero,
                    zeroBlocks(options, setting.zero)};
    auto plan = materialize(
        graph, shape,
        [&](size_t k) -> const OpOption & { return chosenOption(built, sol->choice, nodeFor(k)); },
        setting.recomputeGroup);
    if (!plan) {
      t.why = plan.status().message();
      break;
    }
    auto tPrice = Clock::now();
    auto priced = price(graph, *plan, cluster, options, cache);
    if (std::getenv("NNSC_AUTODIST_DEBUG"))
      std::fprintf(stderr, "price %.2f s\n", secondsSince(tPrice));
    if (!priced) {
      t.why = priced.status().message();
      break;
    }
    if (takePriced(out, plan.take(), *priced, limit))
      break;
    // The problem's memory leaves out what only the exact model sees (the
    // transient peak of the largest op): the next solve must find a plan
    // below this one's problem memory by the excess, or it returns the same.
    const double excess = (priced->memory - limit) * 1.05;
    dpLimit = std::min(dpLimit - excess, sol->memory - excess);
    if (dpLimit <= 0)
      break;
  }
  t.microBatches = setting.microBatches;
  t.secondsPerSample = t.stepSeconds / (t.dp * t.microBatches);
  t.searchSeconds = secondsSince(t0);
  return out;
}

// A built-in policy's plan priced the same way (the hand plans the search
// must beat, kept among the candidates).
// The built-in policies' plans by (policy, devices per copy, micro-batches):
// ZeRO and recompute groups are set on a copy, so each is made once.
using SeedPlans = std::map<std::tuple<std::string, int, int>, Expected<proto::Plan>>;

Outcome seedTrial(const ir::Graph &graph, const cost::Cluster &cluster, const Options &options,
                  RelayoutCache &cache, SeedPlans &seeds, const std::string &policy,
                  const Setting &setting, double limit) {
  Outcome out;
  Trial &t = out.trial;
  t.planNgpus = setting.planNgpus;
  t.dp = setting.dp;
  t.zero = setting.zero;
  t.source = policy;
  for (int g : setting.recomputeGroup)
    t.recomputeLayers = std::max(t.recomputeLayers, g + 1);
  plan::PlanOptions po;
  po.policy = policy;
  po.runtimeNgpus = options.runtimeNgpus;
  po.planNgpus = setting.planNgpus;
  po.microBatches = setting.microBatches;
  po.zero = setting.zero;
  t.microBatches = setting.microBatches;
  auto key = std::make_tuple(policy, setting.planNgpus, setting.microBatches);
  auto made = seeds.find(key);
  if (made == seeds.end()) {
    // The policy alone: the plan that wins is checked and fingerprinted as
    // autodist's (plan::makePlan); a seed is checked where it is priced.
    auto seed = plan::findPolicy(policy)->make(graph, po);
    if (seed) {
      seed->set_format_version(plan::kPlanFormatVersion);
      if (seed->micro_batches() == 0)
        seed->set_micro_batches(po.microBatches);
    }
    made = seeds.emplace(key, std::move(seed)).first;
  }
  if (!made->second) {
    t.why = made->second.status().message();
    return out;
  }
  Expected<proto::Plan> plan = *made->second;
  plan->set_zero(setting.zero);
  if (zeroBlocks(options, setting.zero) > 1)
    plan->set_zero_ngroups(zeroBlocks(options, setting.zero));
  // The configuration's groups (the policies make none of their own).
  for (size_t k = 0; k < setting.recomputeGroup.size(); ++k)
    plan->mutable_nodes(static_cast<int>(k))->set_recompute_group(setting.recomputeGroup[k]);
  if (options.constraints) {
    std::string broken =
        plan::constraintViolation(graph, *plan, *options.constraints, *setting.constraints);
    if (!broken.empty()) {
      t.why = "breaks a constraint: " + broken;
      return out;
    }
  }
  auto priced = price(graph, *plan, cluster, options, cache);
  if (!priced) {
    t.why = priced.status().message();
    return out;
  }
  t.stepSeconds = priced->step;
  t.memoryBytes = priced->memory;
  t.secondsPerSample = t.stepSeconds / (t.dp * t.microBatches);
  t.fits = priced->memory <= limit;
  if (!t.fits)
    t.why = "needs " + plan::formatBytes(priced->memory) + " per device";
  plan->set_policy("autodist");
  out.plan = plan.take();
  return out;
}

} // namespace

int widestSplit(const ir::Graph &graph, const cost::Cluster &cluster, int devices) {
  int64_t most = 1;
  for (const ir::Tensor &t : graph.tensors())
    for (int64_t d : t.shape)
      most = std::max(most, d);
  return int(std::min<int64_t>({most, cluster.devicesPerNode, devices}));
}

Expected<Result> search(const ir::Graph &graph, const cost::Cluster &cluster,
                        const Options &options) {
  auto t0 = Clock::now();
  const int N = options.runtimeNgpus;
  if (N < 1)
    return errorf("error: impossible --runtime-ngpus {}", N);
  if (options.planNgpus < 0 || (options.planNgpus > 0 && N % options.planNgpus != 0))
    return errorf("error: --runtime-ngpus {} is not a multiple of --plan-ngpus {}", N,
                  options.planNgpus);
  if (!cluster.comm)
    return Status::error("error: autodist needs a communication table (--comm, --cluster, or a "
                         "device with a shipped table)");
  // A job past one node needs the table's curves between nodes (every dp
  // reduction crosses them): without any, no configuration can be priced,
  // so say it once instead of after pricing each.
  if (N > cluster.devicesPerNode && !cluster.comm->has(cost::Collective::AllReduce,
                                                       cost::Placement::Inter))
    return errorf("error: --runtime-ngpus {} spans {} nodes of {} devices, but the communication "
                  "table has no curves between nodes (placement inter) to price them; profile "
                  "them or plan for one node",
                  N, (N + cluster.devicesPerNode - 1) / cluster.devicesPerNode,
                  cluster.devicesPerNode);
  Result result;
  result.memLimit =
      options.memLimit > 0 ? options.memLimit : options.memFraction * cluster.device.memoryBytes;
  if (result.memLimit <= 0)
    return Status::error("error: autodist needs a memory limit: the device spec gives no memory; "
                         "pass --mem-limit");

  std::vector<plan::NodeConstraint> constrained;
  if (options.constraints) {
    auto nodes = plan::constrainNodes(graph, *options.constraints);
    if (!nodes)
      return nodes.status();
    constrained = nodes.take();
  }

  // What recompute may pick from.
  RepeatedBlocks blocks = repeatedBlocks(graph);
  std::vector<plan::RecomputeSelector> named;
  if (options.recompute == Options::Recompute::Modules) {
    plan::RecomputeSelector sel;
    sel.kind = plan::RecomputeSelector::ModuleClass;
    sel.patterns = options.recomputeModules;
    named.push_back(sel);
  }
  if (options.zero >= 3 && options.recompute == Options::Recompute::None)
    return Status::error("error: --zero 3 with --recompute none: ZeRO-3 gathers each recompute "
                         "group's parameters when the group runs; pass --recompute auto or a "
                         "module class");
  if (options.zero >= 3 && options.recompute == Options::Recompute::Auto && blocks.paths.empty())
    return errorf("error: --zero 3: {} has no repeated module class for recompute auto to "
                  "group; pass --recompute CLASS",
                  graph.name);
  if (options.recompute == Options::Recompute::Auto && !blocks.paths.empty()) {
    result.recomputeClass = blocks.cls;
    result.recomputeInstances = static_cast<int>(blocks.paths.size());
  }

  std::vector<int> sizes;
  if (options.planNgpus > 0)
    sizes.push_back(options.planNgpus);
  else
    for (int t = 1, most = widestSplit(graph, cluster, N); t <= most; ++t)
      if (N % t == 0)
        sizes.push_back(t);

  std::vector<proto::Plan> plans;
  double lastLeast = 0; // the least memory of the last kept search
  auto keep = [&](Outcome o) {
    lastLeast = o.leastBytes;
    result.trials.push_back(o.trial);
    plans.push_back(std::move(o.plan));
    return result.trials.back();
  };
  RelayoutCache cache(cluster);
  SeedPlans seeds;
  // Every instance's recompute group, once: the first `count` instances'
  // groups are those numbered below count (numbered in node order).
  std::vector<int> allGroups;
  if (options.recompute == Options::Recompute::Auto && !blocks.paths.empty()) {
    auto g = recomputeGroups(graph, firstInstances(blocks, static_cast<int>(blocks.paths.size())));
    if (!g)
      return g.status();
    allGroups = g.take();
  }
  for (int T : sizes) {
    if (options.pipelineStages > 0)
      break; // pipelines only
    int dp = N / T;
    int micro = microBatchesFor(options, dp);
    if (micro < 1)
      continue; // the global batch does not split over dp copies
    // ZeRO-3 shards the weights its recompute groups alone read: it is
    // searched where groups can exist (recompute auto or named classes).
    const bool grouped = (options.recompute == Options::Recompute::Auto && !blocks.paths.empty()) ||
                         options.recompute == Options::Recompute::Modules;
    std::vector<int> zeros;
    if (options.zero >= 0)
      zeros = {options.zero};
    else if (dp > 1)
      zeros = grouped ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 1, 2};
    else
      zeros = {0};
    for (int z : zeros) {
      if (!zeroSplits(options, z, dp))
        continue; // its copies do not fill the blocks
      Setting s;
      if (options.constraints)
        s.constraints = &constrained;
      s.planNgpus = T;
      s.dp = dp;
      s.zero = z;
      s.microBatches = micro;
      auto groups = recomputeGroups(graph, named);
      if (!groups)
        return groups.status();
      s.recomputeGroup = *groups;
      // ZeRO-3 without groups shards nothing more than ZeRO-2: under
      // recompute auto its first trial recomputes every instance (below).
      const bool ungrouped = std::none_of(s.recomputeGroup.begin(), s.recomputeGroup.end(),
                                          [](int g) { return g >= 0; });
      bool fits = false;
      if (z < 3 || !ungrouped)
        fits = keep(solveSetting(graph, cluster, options, s, result.memLimit, cache, blocks)).fits;
      if (!fits && options.recompute == Options::Recompute::Auto && !blocks.paths.empty()) {
        // The fewest recomputed layers that fit. The problem's least memory
        // falls by the same bytes for every layer recomputed (the layers are
        // alike), so the count where it meets the limit is a lower bound;
        // the exact memory adds the transient peak on top. Aim there, then
        // step by the excess over the limit, bisecting what is left.
        const double least0 = lastLeast;
        const int layers = static_cast<int>(blocks.paths.size());
        int lo = 1, hi = layers, best = -1;
        double perLayer = 0;
        auto firstGroups = [&](int count) {
          std::vector<int> g = allGroups;
          for (int &group : g)
            group = group < count ? group : -1;
          return g;
        };
        auto tryCount = [&](int count) {
          Setting r = s;
          r.recomputeGroup = firstGroups(count);
          Trial tr = keep(solveSetting(graph, cluster, options, r, result.memLimit, cache, blocks));
          if (tr.fits)
            best = count;
          return tr;
        };
        // Every instance first: where even that does not fit, no count does.
        if (tryCount(layers).fits) {
          hi = layers - 1;
          // (Measured from the trial without recompute, where there was one.)
          perLayer = z < 3 || !ungrouped ? (least0 - lastLeast) / layers : 0;
        } else {
          lo = hi + 1;
        }
        int guess = -1;
        if (perLayer > 0 && least0 > result.memLimit)
          guess = static_cast<int>(std::ceil((least0 - result.memLimit) / perLayer));
        lo = std::max(lo, guess - 1); // one below, for layers not quite alike
        while (lo <= hi) {
          int mid = guess >= lo && guess <= hi ? guess : (lo + hi) / 2;
          Trial tr = tryCount(mid);
          if (tr.fits) {
            hi = mid - 1;
            guess = -1;
          } else {
            lo = mid + 1;
            guess = tr.memoryBytes > result.memLimit && perLayer > 0
                        ? mid + static_cast<int>(
                                    std::ceil((tr.memoryBytes - result.memLimit) / perLayer))
                        : -1;
          }
        }
        fits = best > 0;
        // The seed policies below take the fewest that fit, else every
        // instance (their least memory).
        s.recomputeGroup = firstGroups(fits ? best : layers);
      }
      if (T > 1)
        for (const char *policy : {"tp", "data"})
          keep(seedTrial(graph, cluster, options, cache, seeds, policy, s, result.memLimit));
      if (fits && options.zero < 0)
        break; // ZeRO only where the copy does not fit without it
    }
  }

  if (options.pipelineStages != 0) {
    auto piped = searchPipelines(graph, cluster, options, result.memLimit, cache, blocks,
                                 options.constraints ? &constrained : nullptr);
    if (!piped)
      return piped.status();
    for (Outcome &o : *piped)
      keep(std::move(o));
  }

  for (size_t i = 0; i < result.trials.size(); ++i) {
    const Trial &t = result.trials[i];
    if (!t.fits)
      continue;
    if (result.chosen < 0 ||
        t.secondsPerSample < result.trials[static_cast<size_t>(result.chosen)].secondsPerSample)
      result.chosen = static_cast<int>(i);
  }
  result.totalSeconds = secondsSince(t0);
  result.ilpCheck = options.ilpCheck;
  if (result.chosen < 0) {
    const Trial *least = nullptr;
    for (const Trial &t : result.trials)
      if (t.memoryBytes > 0 && (!least || t.memoryBytes < least->memoryBytes))
        least = &t;
    if (!least) { // nothing could be priced: the widest search says why
      auto widest = std::find_if(result.trials.rbegin(), result.trials.rend(),
                                 [](const Trial &t) { return t.source == "search"; });
      return errorf("error: autodist found no plan on {} devices: {}", N,
                    widest == result.trials.rend() ? "no configuration to try" : widest->why);
    }
    // Where a constraints file costs memory: the cheapest configuration it
    // does, and the op it holds furthest above its smallest option.
    const Trial *held = nullptr;
    for (const Trial &t : result.trials)
      if (!t.constraintNote.empty() && (!held || t.memoryBytes < held->memoryBytes))
        held = &t;
    return errorf("error: autodist found no plan within the memory limit of {} per device on {} "
                  "devices; the least any configuration needs is {} ({} x {}, "
                  "zero {}, {} recompute groups, {}){}; raise --mem-limit or add devices",
                  plan::formatBytes(result.memLimit), N, plan::formatBytes(least->memoryBytes),
                  where(*least), least->dp, least->zero, least->recomputeLayers,
                  least->source == "search" ? "searched" : least->source + " policy",
                  held ? fmt::format("; over {} device(s) per copy the constraints file {}",
                                     held->planNgpus, held->constraintNote)
                       : "");
  }
  const Trial &c = result.trials[static_cast<size_t>(result.chosen)];
  if (c.zero > 0 && options.zero < 0)
    result.notes.push_back(
        fmt::format("ZeRO-{}: {} no plan over {} fits {} per device", c.zero,
                    c.zero == 1 ? "without it" : fmt::format("with ZeRO-{} at most", c.zero - 1),
                    where(c), plan::formatBytes(result.memLimit)));
  if (c.recomputeLayers > 0 && options.recompute == Options::Recompute::Auto) {
    int fewest = c.recomputeLayers;
    for (const Trial &t : result.trials)
      if (t.fits && t.source == "search" && t.planNgpus == c.planNgpus && t.stages == c.stages &&
          t.zero == c.zero)
        fewest = std::min(fewest, t.recomputeLayers);
    result.notes.push_back(fmt::format(
        "recompute {} of {} {} instances: {}; {}{}", c.recomputeLayers, blocks.paths.size(),
        blocks.cls,
        options.zero >= 3
            ? std::string("--zero 3 shards the weights that a recomputed instance alone reads")
            : fmt::format("without recompute no plan over {} fits {} per device", where(c),
                          plan::formatBytes(result.memLimit)),
        c.stages > 1 ? "each stage recomputes the fewest of its own that fit"
                     : fmt::format("{} is the fewest that fit", fewest),
        fewest < c.recomputeLayers ? fmt::format(", {} the fastest", c.recomputeLayers) : ""));
  }
  result.plan = std::move(plans[static_cast<size_t>(result.chosen)]);
  return result;
}

} // namespace nnsc::autodist
