// autodist's pipeline search (Internal.h searchPipelines, docs/autodist.md):
// stage counts, devices per stage, one search per stage under its memory
// limit with the activations its schedule keeps in flight, the stages joined
// and priced whole (Plan/PipelineSchedule.h times the schedule).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "Internal.h"
#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PipelineSchedule.h"
#include "nnsc/Plan/PlanPrinter.h"
#include "nnsc/Search/Repeated.h"
#include "nnsc/Search/Solver.h"

namespace nnsc::autodist {

namespace {

/// One virtual stage's search.
struct StagePlan {
  Built built;
  std::vector<int> choice;
  std::vector<std::string> recomputed; ///< instances of the repeated block
  bool fits = false;
  std::string why;
  double least = 0; ///< where nothing fits: the least memory the stage needs
  bool folded = false;
  int64_t states = 0;
};

/// A pipeline configuration and what every virtual stage shares.
struct StageContext {
  const ir::Graph &graph;
  const cost::Cluster &cluster;
  const Options &options;
  RelayoutCache &cache;
  const RepeatedBlocks &blocks;
  const std::vector<plan::NodeConstraint> *constrained;
  std::vector<int> stageOf; ///< per node: its virtual stage
  int stages = 1, planNgpus = 1, dp = 1, zero = 0, micro = 1;
  /// Stage plans by (virtual stage, first node, end node, memory limit) for
  /// the configuration above: moving one boundary re-plans two stages only.
  std::map<std::tuple<int, int64_t, int64_t, double>, StagePlan> memo = {};
  /// Per virtual stage: how many instances its last plan recomputed, where
  /// the next search of it (a boundary moved one pivot, a lowered limit)
  /// starts looking.
  std::map<int, int> recomputeHint = {};
};

bool inside(const ir::Node &node, const std::string &path) {
  return std::any_of(node.moduleStack.begin(), node.moduleStack.end(),
                     [&](const ir::ModuleFrame &f) { return f.path == path; });
}

// The repeated block's instances wholly inside virtual stage k.
std::vector<std::string> stageInstances(const StageContext &c, int k) {
  std::vector<std::string> paths;
  for (const std::string &path : c.blocks.paths) {
    bool any = false, all = true;
    for (size_t n = 0; n < c.graph.nodes().size(); ++n)
      if (inside(c.graph.nodes()[n], path)) {
        any = true;
        all = all && c.stageOf[n] == k;
      }
    if (any && all)
      paths.push_back(path);
  }
  return paths;
}

// The most micro-batches of `chunk` a stage running `passes` holds at once.
int chunkInFlight(const std::vector<plan::PipelinePass> &passes, int chunk) {
  int held = 0, peak = 0;
  for (const plan::PipelinePass &p : passes)
    if (p.chunk == chunk) {
      held += p.forward ? 1 : -1;
      peak = std::max(peak, held);
    }
  return std::max(1, peak);
}

// Solves virtual stage k under `limit` with `recomputed` instances; `paths`
// are the stage's instances of the repeated block (stageInstances).
StagePlan solveStage(const StageContext &c, int k, double inFlight, double limit,
                     const std::vector<std::string> &recomputed,
                     const std::vector<std::string> &paths) {
  StagePlan r;
  r.recomputed = recomputed;
  Setting s;
  s.planNgpus = c.planNgpus;
  s.dp = c.dp;
  s.zero = c.zero;
  s.constraints = c.constrained;
  s.stages = c.stages;
  s.microBatches = c.micro;
  s.inFlight = inFlight;
  s.inStage.resize(c.stageOf.size());
  for (size_t n = 0; n < c.stageOf.size(); ++n)
    s.inStage[n] = c.stageOf[n] == k;
  auto groups = recomputeGroups(c.graph, recomputeSelectors(c.options, recomputed));
  if (!groups) {
    r.why = groups.status().message();
    return r;
  }
  s.recomputeGroup = groups.take();
  r.built = buildProblem(c.graph, c.cluster, c.options, s, c.cache);
  if (!r.built.infeasible.empty()) {
    r.why = r.built.infeasible;
    return r;
  }
  r.states = largestFrontier(r.built.problem);
  RepeatedBlocks mine{c.blocks.cls, paths};
  std::vector<int> rep;
  if (c.options.foldRepeats)
    rep = representatives(c.graph, r.built, mine);
  r.least = search::leastMemory(r.built.problem);
  if (r.least > limit) {
    r.why = "needs at least " + plan::formatBytes(r.least) + " per device";
    return r;
  }
  r.built.problem.memoryLimit = limit;
  auto sol = solveFoldable(r.built.problem, rep, c.options, r.folded);
  if (!sol) {
    r.why = sol.status().message();
    return r;
  }
  r.choice = sol->choice;
  r.fits = true;
  return r;
}

// Virtual stage k's plan: without recompute, else (--recompute auto) the
// fewest of its instances recomputed that fit. Fitting only gets easier as
// more are recomputed, so the fewest is found by bisection, started from the
// count the stage's last plan needed (`hint`, when there was one): a moved
// boundary or a lowered limit changes it by a layer or two, found in two or
// three solves, not the eight of a bisection over 40 layers.
StagePlan planStage(const StageContext &c, int k, double inFlight, double limit,
                    std::optional<int> hint) {
  const std::vector<std::string> paths = stageInstances(c, k);
  auto solveWith = [&](const std::vector<std::string> &all, int count) {
    return solveStage(c, k, inFlight, limit, {all.begin(), all.begin() + count}, paths);
  };
  if (c.options.recompute != Options::Recompute::Auto)
    return solveStage(c, k, inFlight, limit, {}, paths);
  const int P = static_cast<int>(paths.size());
  if (!hint || P == 0 || *hint <= 0 || *hint > P) {
    StagePlan none = solveStage(c, k, inFlight, limit, {}, paths);
    if (none.fits || P == 0)
      return none;
    hint = P; // the bisection below then starts at every instance recomputed
  }
  // lo: the most known not to fit (or 0, untried: "none" may fit); hi: the
  // fewest known to fit, with its plan.
  int lo = -1, hi = -1;
  std::optional<StagePlan> best;
  StagePlan first = solveWith(paths, *hint);
  if (first.fits) {
    hi = *hint;
    best = std::move(first);
    for (int step = 1; hi > 0;) { // gallop down until a count does not fit
      int at = std::max(0, hi - step);
      StagePlan p = solveWith(paths, at);
      if (!p.fits) {
        lo = at;
        break;
      }
      hi = at;
      best = std::move(p);
      step *= 2;
    }
    if (hi == 0)
      return std::move(*best);
  } else {
    if (*hint == P)
      return first; // nothing fits
    lo = *hint;
    for (int step = 1;;) { // gallop up until a count fits
      int at = std::min(P, lo + step);
      StagePlan p = solveWith(paths, at);
      if (p.fits) {
        hi = at;
        best = std::move(p);
        break;
      }
      if (at == P)
        return p;
      lo = at;
      step *= 2;
    }
  }
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    StagePlan p = solveWith(paths, mid);
    if (p.fits) {
      hi = mid;
      best = std::move(p);
    } else {
      lo = mid;
    }
  }
  return std::move(*best);
}

// One pipelined configuration: every virtual stage planned, joined, priced
// whole; a physical stage whose exact memory passes the limit is planned
// again under a limit lowered by the excess (up to 3 times).
Outcome pipelineTrial(StageContext &c, const plan::PipelineOptions &po,
                      const std::vector<int64_t> &cuts, double limit) {
  auto t0 = Clock::now();
  Outcome out;
  Trial &t = out.trial;
  t.planNgpus = c.planNgpus;
  t.stages = c.stages;
  t.dp = c.dp;
  t.zero = c.zero;
  t.microBatches = c.micro;
  t.source = "search";
  const int S = c.stages, V = po.virtualStages;
  std::vector<std::vector<plan::PipelinePass>> passes;
  for (int p = 0; p < S; ++p) {
    auto list = plan::pipelinePasses(po.schedule, S, V, c.micro, p);
    if (!list) {
      t.why = list.status().message();
      return out;
    }
    passes.push_back(list.take());
  }
  std::vector<double> limits(static_cast<size_t>(S * V), limit / V);
  std::vector<StagePlan> stagePlans(static_cast<size_t>(S * V));
  std::vector<bool> stale(static_cast<size_t>(S * V), true);
  for (int attempt = 0; attempt < 4; ++attempt) {
    for (int k = 0; k < S * V; ++k) {
      if (!stale[static_cast<size_t>(k)])
        continue;
      int inFlight = chunkInFlight(passes[static_cast<size_t>(k % S)], k / S);
      auto key = std::make_tuple(k, cuts[static_cast<size_t>(k)],
                                 k + 1 < S * V ? cuts[static_cast<size_t>(k) + 1] : INT64_MAX,
                                 limits[static_cast<size_t>(k)]);
      auto known = c.memo.find(key);
      if (known == c.memo.end()) {
        auto hint = c.recomputeHint.find(k);
        StagePlan planned =
            planStage(c, k, inFlight, limits[static_cast<size_t>(k)],
                      hint == c.recomputeHint.end() ? std::nullopt : std::optional(hint->second));
        if (planned.fits)
          c.recomputeHint[k] = static_cast<int>(planned.recomputed.size());
        known = c.memo.emplace(key, std::move(planned)).first;
      }
      stagePlans[static_cast<size_t>(k)] = known->second;
      stale[static_cast<size_t>(k)] = false;
      const StagePlan &sp = stagePlans[static_cast<size_t>(k)];
      if (!sp.fits) {
        t.why = sp.why.rfind("needs", 0) == 0 ? fmt::format("{} in stage {}", sp.why, k)
                                               : fmt::format("stage {}: {}", k, sp.why);
        t.memoryBytes = sp.least > 0 ? sp.least + (limit / V - limits[static_cast<size_t>(k)]) : 0;
        t.searchSeconds = secondsSince(t0);
        return out;
      }
    }
    t.decisions = 0;
    t.states = 0;
    t.folded = true;
    std::vector<std::string> recomputed;
    for (const StagePlan &sp : stagePlans) {
      t.decisions += sp.built.decisions;
      t.states = std::max(t.states, sp.states);
      t.folded = t.folded && sp.folded;
      recomputed.insert(recomputed.end(), sp.recomputed.begin(), sp.recomputed.end());
    }
    t.ops = static_cast<int>(c.graph.nodes().size());
    t.recomputeLayers = static_cast<int>(recomputed.size());
    auto groups = recomputeGroups(c.graph, recomputeSelectors(c.options, recomputed));
    if (!groups) {
      t.why = groups.status().message();
      break;
    }
    if (c.options.recompute == Options::Recompute::Modules)
      for (int g : *groups)
        t.recomputeLayers = std::max(t.recomputeLayers, g + 1);
    PlanShape shape{c.planNgpus, c.planNgpus * c.dp, c.micro, c.zero,
                    zeroBlocks(c.options, c.zero)};
    auto plan = materialize(
        c.graph, shape,
        [&](size_t n) -> const OpOption & {
          const StagePlan &sp = stagePlans[static_cast<size_t>(c.stageOf[n])];
          return chosenOption(sp.built, sp.choice, n);
        },
        *groups);
    if (!plan) {
      t.why = plan.status().message();
      break;
    }
    plan::applyPipelineCuts(po, cuts, *plan);
    auto priced = price(c.graph, *plan, c.cluster, c.options, c.cache);
    if (!priced) {
      t.why = priced.status().message();
      break;
    }
    if (takePriced(out, plan.take(), *priced, limit))
      break;
    bool lowered = false;
    for (int p = 0; p < S; ++p) {
      double worst = 0;
      for (int d = p * c.planNgpus; d < (p + 1) * c.planNgpus; ++d)
        worst = std::max(worst, priced->deviceMemory[static_cast<size_t>(d)]);
      if (worst <= limit)
        continue;
      for (int k = p; k < S * V; k += S) {
        limits[static_cast<size_t>(k)] -= (worst - limit) * 1.05 / V;
        stale[static_cast<size_t>(k)] = true;
        lowered = lowered || limits[static_cast<size_t>(k)] > 0;
      }
    }
    if (!lowered)
      break;
  }
  if (t.microBatches > 0 && t.dp > 0)
    t.secondsPerSample = t.stepSeconds / (t.dp * t.microBatches);
  t.searchSeconds = secondsSince(t0);
  return out;
}

// "20+20": pivot instances (layers) per virtual stage.
std::string layersText(const std::vector<int64_t> &cuts, const std::vector<int64_t> &starts) {
  std::string out;
  for (size_t k = 0; k < cuts.size(); ++k) {
    int64_t end = k + 1 < cuts.size() ? cuts[k + 1] : INT64_MAX;
    long count = std::count_if(starts.begin(), starts.end(),
                               [&](int64_t s) { return s >= cuts[k] && s < end; });
    out += (out.empty() ? "" : "+") + std::to_string(count);
  }
  return out;
}

void assignStages(StageContext &c, const std::vector<int64_t> &cuts) {
  c.stageOf.assign(c.graph.nodes().size(), 0);
  for (size_t n = 0, k = 0; n < c.graph.nodes().size(); ++n) {
    while (k + 1 < cuts.size() && static_cast<int64_t>(n) >= cuts[k + 1])
      ++k;
    c.stageOf[n] = static_cast<int>(k);
  }
}

// Is `a` better than `b`: it fits where b does not, or both fit and a is
// faster per sample, or neither fits and a needs less memory.
bool better(const Trial &a, const Trial &b) {
  if (a.fits != b.fits)
    return a.fits;
  if (a.fits)
    return a.secondsPerSample < b.secondsPerSample * (1 - 1e-9);
  return a.memoryBytes > 0 && (b.memoryBytes <= 0 || a.memoryBytes < b.memoryBytes);
}

/// A configuration searched, to refine its cuts.
struct Tried {
  StageContext context;
  plan::PipelineOptions po;
  std::vector<int64_t> cuts;
};

// Moves one stage boundary at a time by one pivot, either way, keeping a move
// that makes the configuration better, until none does or `budget` trials
// are spent: the balanced cut evens out compute, not memory, and 1F1B's first
// stage holds the most micro-batches. The better outcome, or none.
std::optional<Outcome> moveCuts(Tried t, const Outcome &start, const std::vector<int64_t> &starts,
                                double limit, int budget) {
  auto t0 = Clock::now();
  Outcome best = start;
  std::vector<int64_t> cuts = t.cuts;
  bool improved = true;
  int spent = 0;
  while (improved && spent < budget) {
    improved = false;
    for (size_t b = 1; b < cuts.size() && !improved && spent < budget; ++b)
      for (int dir : {-1, +1}) {
        auto at = std::lower_bound(starts.begin(), starts.end(), cuts[b]) - starts.begin();
        long j = static_cast<long>(at) + dir;
        if (j < 0 || j >= static_cast<long>(starts.size()))
          continue;
        int64_t moved = starts[static_cast<size_t>(j)];
        if (moved <= cuts[b - 1] || (b + 1 < cuts.size() && moved >= cuts[b + 1]))
          continue;
        std::vector<int64_t> trial = cuts;
        trial[b] = moved;
        assignStages(t.context, trial);
        Outcome o = pipelineTrial(t.context, t.po, trial, limit);
        ++spent;
        if (std::getenv("NNSC_AUTODIST_DEBUG"))
          std::fprintf(stderr, "pipeline cuts %s: %s %.4g s/sample %.4g bytes\n",
                       layersText(trial, starts).c_str(), o.trial.fits ? "fits" : "no",
                       o.trial.secondsPerSample, o.trial.memoryBytes);
        if (better(o.trial, best.trial)) {
          best = std::move(o);
          cuts = trial;
          improved = true;
          break;
        }
        if (spent >= budget)
          break;
      }
  }
  if (cuts == t.cuts)
    return std::nullopt;
  best.trial.layers = layersText(cuts, starts);
  best.trial.balancedLayers = layersText(t.cuts, starts);
  best.trial.searchSeconds = secondsSince(t0);
  return best;
}

} // namespace

Expected<std::vector<Outcome>> searchPipelines(const ir::Graph &graph, const cost::Cluster &cluster,
                                               const Options &options, double limit,
                                               RelayoutCache &cache, const RepeatedBlocks &blocks,
                                               const std::vector<plan::NodeConstraint> *constrained) {
  const int N = options.runtimeNgpus;
  std::vector<int> counts;
  if (options.pipelineStages > 0) {
    if (N % options.pipelineStages != 0)
      return errorf("error: --runtime-ngpus {} does not split into --pipeline {} stages", N,
                    options.pipelineStages);
    counts.push_back(options.pipelineStages);
  } else {
    for (int S = 2; S <= N; ++S)
      if (N % S == 0)
        counts.push_back(S);
  }
  auto pivots = plan::pivotStarts(graph, options.pipelinePivots);
  if (!pivots)
    return pivots.status();
  const std::vector<int64_t> &starts = *pivots;
  std::vector<Outcome> out;
  std::vector<Tried> tried; // beside out
  for (int S : counts) {
    plan::PipelineOptions po;
    po.stages = S;
    po.virtualStages = options.virtualStages;
    po.schedule = options.schedule;
    po.pivots = options.pipelinePivots;
    auto cuts = plan::pipelineCuts(graph, po);
    if (!cuts) {
      // More stages than places to cut: larger counts cannot do better.
      if (options.pipelineStages > 0 || S == counts.front())
        return cuts.status();
      break;
    }
    StageContext c{graph, cluster, options, cache, blocks, constrained, {}, S};
    assignStages(c, *cuts);
    std::vector<int> widths;
    if (options.planNgpus > 0) {
      if (options.planNgpus % S != 0) {
        if (options.pipelineStages > 0)
          return errorf("error: --plan-ngpus {} (devices per copy) does not split into {} "
                        "pipeline stages",
                        options.planNgpus, S);
        continue;
      }
      widths.push_back(options.planNgpus / S);
    } else {
      for (int T = 1, most = widestSplit(graph, cluster, N / S); T <= most; ++T)
        if ((N / S) % T == 0)
          widths.push_back(T);
    }
    for (int T : widths) {
      c.planNgpus = T;
      c.dp = N / (S * T);
      c.micro = microBatchesFor(options, c.dp);
      if (c.micro < 1)
        continue; // the global batch does not split over these copies
      std::vector<int> zeros;
      if (options.zero >= 2) {
        // ZeRO-2 reduces every micro-batch; pipelines accumulate (Validate.cpp).
        if (options.pipelineStages > 0)
          return errorf("error: --zero {} with --pipeline {}: ZeRO-{} reduce-scatters each "
                        "micro-batch's gradients, a pipeline accumulates them over its "
                        "schedule; use --zero 1",
                        options.zero, options.pipelineStages, options.zero);
        continue;
      }
      if (options.zero >= 0)
        zeros = {options.zero};
      else
        zeros = c.dp > 1 ? std::vector<int>{0, 1} : std::vector<int>{0};
      for (int z : zeros) {
        if (!zeroSplits(options, z, c.dp))
          continue; // its copies do not fill the blocks
        c.zero = z;
        c.memo.clear();
        out.push_back(pipelineTrial(c, po, *cuts, limit));
        out.back().trial.layers = layersText(*cuts, starts);
        tried.push_back({c, po, *cuts});
        tried.back().context.memo.clear(); // refined ones plan their stages again once
        if (std::getenv("NNSC_AUTODIST_DEBUG"))
          std::fprintf(stderr, "pipeline %d x %d x %d zero %d: %s\n", S, T, c.dp, z,
                       out.back().trial.why.c_str());
        if (out.back().trial.fits && options.zero < 0)
          break; // ZeRO only where the stage does not fit without it
      }
    }
  }
  // Move the boundaries of the fastest configuration that fits, and of those
  // that miss the limit by at most a quarter but would be faster if they fit:
  // the fastest first, three at most.
  int fastest = -1;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].trial.fits &&
        (fastest < 0 || out[i].trial.secondsPerSample < out[size_t(fastest)].trial.secondsPerSample))
      fastest = static_cast<int>(i);
  std::vector<int> refine;
  for (size_t i = 0; i < out.size(); ++i) {
    const Trial &t = out[i].trial;
    bool near = !t.fits && t.memoryBytes > 0 && t.memoryBytes <= 1.25 * limit &&
                t.secondsPerSample > 0 &&
                (fastest < 0 || t.secondsPerSample < out[size_t(fastest)].trial.secondsPerSample);
    if (near || static_cast<int>(i) == fastest)
      refine.push_back(static_cast<int>(i));
  }
  std::sort(refine.begin(), refine.end(), [&](int a, int b) {
    return out[size_t(a)].trial.secondsPerSample < out[size_t(b)].trial.secondsPerSample;
  });
  if (refine.size() > 3)
    refine.resize(3);
  if (options.cutMoves > 0 && starts.size() > 1)
    for (int i : refine) {
      auto moved =
          moveCuts(std::move(tried[size_t(i)]), out[size_t(i)], starts, limit, options.cutMoves);
      if (moved)
        out.push_back(std::move(*moved));
    }
  return out;
}

} // namespace nnsc::autodist
