// autodist's text report (AutoDist.h printReport).
#include <map>

#include "Internal.h"
#include "nnsc/AutoDist/AutoDist.h"
#include "nnsc/Plan/PlanPrinter.h"

namespace nnsc::autodist {

namespace {

// "over: needs ..." for memory, "rejected: ..." for anything else.
std::string verdict(const std::string &why) {
  bool memory = why.rfind("needs", 0) == 0 || why.rfind("the plan found needs", 0) == 0;
  bool prefixed = why.rfind("error: ", 0) == 0; // a seed policy's own error
  return (memory ? "over: " : "rejected: ") + why.substr(prefixed ? 7 : 0);
}

} // namespace

std::string formatSeconds(double s) {
  if (s >= 1)
    return fmt::format("{:.3f} s", s);
  if (s >= 1e-3)
    return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

void printReport(const Result &result, const ir::Graph &graph, const cost::Cluster &cluster,
                 std::ostream &os) {
  os << fmt::format("autodist on {} ({} per device, limit {}): {} configurations in {:.2f} s\n",
                    cluster.device.name, plan::formatBytes(cluster.device.memoryBytes),
                    plan::formatBytes(result.memLimit), result.trials.size(), result.totalSeconds);
  os << "  pp x tp x dp  micro  zero  recompute  source  decisions  frontier  step        per "
        "sample  memory      search   \n";
  for (size_t i = 0; i < result.trials.size(); ++i) {
    const Trial &t = result.trials[i];
    bool chosen = static_cast<int>(i) == result.chosen;
    std::string step = t.stepSeconds > 0 ? formatSeconds(t.stepSeconds) : "-";
    std::string per = t.secondsPerSample > 0 ? formatSeconds(t.secondsPerSample) : "-";
    std::string mem = t.memoryBytes > 0 ? plan::formatBytes(t.memoryBytes) : "-";
    std::string search = t.source == "search" ? fmt::format("{:.2f} s", t.searchSeconds) : "-";
    os << fmt::format("{} {:>2} x {:>2} x {:<3} {:>5}  {:>4}  {:>9}  {:<6}  {:>9}  {:>8}  {:<10}  "
                      "{:<10}  {:<10}  {:<8} {}\n",
                      chosen ? "*" : " ", t.stages, t.planNgpus, t.dp, t.microBatches, t.zero,
                      t.recomputeLayers, t.source,
                      t.source == "search" ? std::to_string(t.decisions) : "-",
                      t.source == "search" ? std::to_string(t.states) : "-", step, per, mem,
                      search,
                      (t.fits ? std::string("fits") : verdict(t.why)) +
                          (t.balancedLayers.empty()
                               ? ""
                               : fmt::format(" (layers {}, moved from {})", t.layers,
                                             t.balancedLayers)));
  }
  if (result.chosen < 0)
    return;
  const Trial &c = result.trials[static_cast<size_t>(result.chosen)];
  std::string shape =
      c.stages > 1
          ? fmt::format("{} pipeline stages ({} micro-batch{}, {} of {} waiting in the schedule; "
                        "layers {}{}) x {} device(s) per stage",
                        c.stages, c.microBatches, c.microBatches == 1 ? "" : "es",
                        formatSeconds(c.bubbleSeconds), formatSeconds(c.stepSeconds), c.layers,
                        c.balancedLayers.empty()
                            ? ""
                            : fmt::format(", boundaries moved from the balanced {}",
                                          c.balancedLayers),
                        c.planNgpus)
          : fmt::format("{} device(s) per copy", c.planNgpus);
  os << fmt::format("chosen: {} x {} copies, zero {}, {} recomputed {}, from {}; "
                    "predicted step {}, {} per device\n",
                    shape, c.dp, c.zero, c.recomputeLayers,
                    result.recomputeClass.empty() ? "groups" : result.recomputeClass, c.source,
                    formatSeconds(c.stepSeconds), plan::formatBytes(c.memoryBytes));
  for (const std::string &note : result.notes)
    os << "  because " << note << '\n';
  if (c.folded)
    os << "  repeated layers solved once: every instance cut alike (--solve-each-layer searches "
          "each)\n";
  if (const IlpCheck *check = result.ilpCheck.get()) {
    os << fmt::format("ILP cross-check (CBC): {} problem(s) solved by both, the same optimum on {} "
                      "(largest excess of the dynamic program {:.2g}); dynamic program {:.2f} s, "
                      "CBC {:.2f} s",
                      check->problems, check->agree, check->worst, check->dpSeconds,
                      check->ilpSeconds);
    if (check->folded)
      os << fmt::format("; {} solved folded, not compared (--solve-each-layer compares them)",
                        check->folded);
    os << '\n';
    for (const std::string &f : check->failures)
      os << "  disagree: " << f << '\n';
  }
  // How each op kind is split in the chosen plan.
  std::map<std::string, std::map<std::string, int>> byOp;
  for (const proto::NodePlan &np : result.plan.nodes()) {
    const ir::Node &node = graph.nodes()[static_cast<size_t>(np.node())];
    std::string how = np.num() > 1 ? "split " + np.ident() : "replicate";
    ++byOp[node.op][how];
  }
  os << "splits of the chosen plan by op:\n";
  for (const auto &[op, hows] : byOp) {
    std::string line;
    for (const auto &[how, count] : hows)
      line += fmt::format("{}{} x{}", line.empty() ? "" : ", ", how, count);
    os << fmt::format("  {:<36} {}\n", op, line);
  }
}

} // namespace nnsc::autodist
