#include "nnsc/Plan/PlanPrinter.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nnsc/Cost/Report.h"
#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/Recompute.h"

namespace nnsc::plan {

namespace {

std::string plural(int64_t n, const char *one, const char *many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

void printSummary(const proto::Plan &plan, const ir::Graph &graph, std::ostream &os) {
  int copies = plan.runtime_ngpus() / plan.plan_ngpus();
  os << fmt::format("plan {} for {} ({}) from {}\n", plan.policy(), graph.name,
                    plural(static_cast<int64_t>(graph.nodes().size()), "node", "nodes"),
                    plan.graph().empty() ? "<unknown>" : plan.graph());
  os << fmt::format(
      "  plan_ngpus {}, runtime_ngpus {} ({}), micro_batches {}, zero {}{}\n", plan.plan_ngpus(),
      plan.runtime_ngpus(), plural(copies, "data-parallel copy", "data-parallel copies"),
      plan.micro_batches(), plan.zero(),
      plan.zero_ngroups() > 1 ? fmt::format(" in {} blocks of {} ranks", plan.zero_ngroups(),
                                            plan.runtime_ngpus() / plan.zero_ngroups())
                              : "");
  if (!plan.schedule().empty())
    os << fmt::format("  schedule {}\n", plan.schedule());
  for (const proto::Stage &s : plan.stages())
    os << fmt::format("  stage {}: devices [{}]\n", s.id(), fmt::join(s.devices(), ", "));
  int groups = 0;
  for (const proto::NodePlan &np : plan.nodes())
    groups = std::max(groups, np.recompute_group() + 1);
  if (groups > 0)
    os << fmt::format("  recompute {}:\n", plural(groups, "group", "groups"));
  for (int g = 0; g < groups; ++g)
    os << fmt::format("    group {}: {}\n", g, describeRecomputeGroup(graph, plan, g));
}

void printMemory(const proto::Plan &plan, const ir::Graph &graph, const PrintOptions &options,
                 std::ostream &os) {
  cost::MemoryOptions memory = options.memory;
  memory.zero = plan.zero();
  memory.dpSize = plan.runtime_ngpus() / plan.plan_ngpus();
  memory.zeroNgroups = std::max(1, plan.zero_ngroups());
  cost::printMemory(estimateMemory(graph, plan, memory), memory, options.capacity, os);
}

std::string partitionText(const proto::NodePlan &np) {
  if (np.num() <= 1)
    return "replicate";
  if (!np.ident().empty() && np.interleave() > 1) // n{3}/2: each of 3 blocks of n halved
    return fmt::format("{}{{{}}}/{}", np.ident(), np.interleave(), np.num());
  if (!np.ident().empty())
    return fmt::format("{}/{}", np.ident(), np.num());
  if (np.interleave() > 1)
    return fmt::format("input{}.dim{}{{{}}}/{}", np.input(), np.dim(), np.interleave(), np.num());
  return fmt::format("input{}.dim{}/{}", np.input(), np.dim(), np.num());
}

std::string moduleText(const ir::Node &node) {
  std::string path = node.modulePath.empty() ? "<top>" : node.modulePath;
  return node.moduleClass.empty() ? path : fmt::format("{} ({})", path, node.moduleClass);
}

void printNodes(const proto::Plan &plan, const ir::Graph &graph, std::ostream &os) {
  std::vector<std::array<std::string, 7>> rows = {
      {"node", "op", "outputs", "partition", "devices", "stage", "module"}};
  for (const proto::NodePlan &np : plan.nodes()) {
    const ir::Node &node = graph.nodes()[static_cast<size_t>(np.node())];
    std::vector<std::string> outs;
    for (int64_t o : node.outputs)
      outs.push_back(fmt::format("%{}", o));
    std::string module = moduleText(node);
    if (np.recompute_group() >= 0)
      module += fmt::format(" [recompute {}]", np.recompute_group());
    rows.push_back({std::to_string(np.node()), node.op, fmt::format("{}", fmt::join(outs, ",")),
                    partitionText(np), fmt::format("[{}]", fmt::join(np.devices(), ", ")),
                    std::to_string(np.stage()), module});
  }
  std::array<size_t, 7> width{};
  for (const auto &r : rows)
    for (size_t c = 0; c < r.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  os << "nodes:\n";
  for (const auto &r : rows) {
    std::string line = " ";
    for (size_t c = 0; c + 1 < r.size(); ++c)
      line += fmt::format(" {:<{}} ", r[c], width[c]);
    os << line << ' ' << r.back() << '\n';
  }
}

} // namespace

std::string formatBytes(double bytes) { return cost::formatBytes(bytes); }

void printPlan(const proto::Plan &plan, const ir::Graph &graph, std::ostream &os,
               const PrintOptions &options) {
  printSummary(plan, graph, os);
  printMemory(plan, graph, options, os);
  printNodes(plan, graph, os);
}

} // namespace nnsc::plan
