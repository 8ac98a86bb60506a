// Pipeline stages: cutting the node order at pivots into balanced stages and
// placing them on devices (Pipeline.h).
#include "nnsc/Plan/Pipeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nnsc/Cost/OpCost.h"
#include "nnsc/Plan/NodeSplit.h"

namespace nnsc::plan {

namespace {

// Forward plus backward FLOPs and bytes of the whole node: what "split evenly
// by cost" balances (bytes weigh in for ops that do no arithmetic).
std::vector<double> nodeCosts(const ir::Graph &graph) {
  std::vector<bool> grad = cost::gradientFlow(graph);
  auto info = [&](int64_t id) {
    const ir::Tensor &t = graph.tensor(id);
    bool state = t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer;
    return cost::TensorInfo{t.shape, t.dtype, bool(grad[static_cast<size_t>(id)]), state};
  };
  std::vector<double> costs;
  for (const ir::Node &node : graph.nodes()) {
    cost::OpShapes shapes;
    shapes.node = &node;
    for (int64_t in : node.inputs)
      shapes.inputs.push_back(info(in));
    for (int64_t out : node.outputs)
      shapes.outputs.push_back(info(out));
    cost::OpCost c = cost::opCost(shapes);
    costs.push_back(c.forward.flops + c.backward.flops + c.forward.bytes + c.backward.bytes);
  }
  return costs;
}

bool endsInIndex(const std::string &path) {
  size_t dot = path.rfind('.');
  std::string last = dot == std::string::npos ? path : path.substr(dot + 1);
  return !last.empty() && std::all_of(last.begin(), last.end(), ::isdigit);
}

// The class with the most numbered instances (ties: the first seen).
std::string defaultPivot(const ir::Graph &graph) {
  std::map<std::string, std::set<std::string>> instances;
  std::vector<std::string> order;
  for (const ir::Node &node : graph.nodes())
    for (const ir::ModuleFrame &f : node.moduleStack)
      if (endsInIndex(f.path)) {
        if (!instances.count(f.cls))
          order.push_back(f.cls);
        instances[f.cls].insert(f.path);
      }
  std::string best;
  for (const std::string &cls : order)
    if (best.empty() || instances[cls].size() > instances[best].size())
      best = cls;
  return best;
}

// The outermost enclosing instance of a pivot class, or "".
std::string pivotInstance(const ir::Node &node, const std::vector<std::string> &pivots) {
  for (const ir::ModuleFrame &f : node.moduleStack)
    if (std::find(pivots.begin(), pivots.end(), f.cls) != pivots.end())
      return f.path;
  return "";
}

} // namespace

Expected<std::vector<int64_t>> pivotStarts(const ir::Graph &graph,
                                           std::vector<std::string> pivots) {
  if (pivots.empty()) {
    std::string cls = defaultPivot(graph);
    if (cls.empty())
      return errorf("error: the graph has no repeated modules (numbered instances such as "
                    "layers.0) to cut into pipeline stages; name the pivots with "
                    "--pipeline-pivots CLASS");
    pivots.push_back(cls);
  }
  std::vector<int64_t> starts;
  std::string previous;
  for (const ir::Node &node : graph.nodes()) {
    std::string instance = pivotInstance(node, pivots);
    if (!instance.empty() && instance != previous && node.id > 0)
      starts.push_back(node.id);
    previous = instance;
  }
  if (starts.empty())
    return errorf("error: no module of class {} in the graph to cut pipeline stages at",
                  fmt::join(pivots, " or "));
  return starts;
}


Status checkPipelineOptions(const PipelineOptions &o) {
  const auto &known = pipelineSchedules();
  if (std::find(known.begin(), known.end(), o.schedule) == known.end())
    return errorf("error: unknown pipeline schedule '{}'; expected one of: {}", o.schedule,
                  fmt::join(known, ", "));
  if (o.stages < 1 || o.stages > kMaxPipelineStages)
    return errorf("error: impossible --pipeline-stages {}; expected 1 to {}", o.stages,
                  kMaxPipelineStages);
  if (o.virtualStages < 1 || o.virtualStages > kMaxVirtualStages)
    return errorf("error: impossible --virtual-stages {}; expected 1 to {}", o.virtualStages,
                  kMaxVirtualStages);
  if (o.virtualStages > 1 && o.schedule != "interleaved")
    return errorf("error: --virtual-stages {} needs --schedule interleaved (got {})",
                  o.virtualStages, o.schedule);
  if (o.schedule == "interleaved" && o.virtualStages < 2)
    return errorf("error: --schedule interleaved needs --virtual-stages 2 or more");
  return Status::ok();
}

Expected<std::vector<int64_t>> balancedCuts(const std::vector<double> &cost,
                                            const std::vector<int64_t> &candidates, int count) {
  if (count < 1 || static_cast<size_t>(count) > candidates.size() + 1)
    return errorf("error: cannot cut the model into {} pipeline stages: it has {} place(s) to "
                  "cut (the starts of pivot module instances after the first node)",
                  count, candidates.size());
  // Positions: 0, the candidates, the end. best[k][j]: the smallest largest
  // stage cost of k stages covering nodes [0, pos[j]).
  std::vector<int64_t> pos{0};
  pos.insert(pos.end(), candidates.begin(), candidates.end());
  pos.push_back(static_cast<int64_t>(cost.size()));
  std::vector<double> prefix{0};
  for (double c : cost)
    prefix.push_back(prefix.back() + c);
  auto span = [&](size_t a, size_t b) {
    return prefix[static_cast<size_t>(pos[b])] - prefix[static_cast<size_t>(pos[a])];
  };
  const double inf = std::numeric_limits<double>::infinity();
  size_t n = pos.size();
  std::vector<std::vector<double>> best(static_cast<size_t>(count) + 1,
                                        std::vector<double>(n, inf));
  std::vector<std::vector<size_t>> from(best.size(), std::vector<size_t>(n, 0));
  best[0][0] = 0;
  for (size_t k = 1; k <= static_cast<size_t>(count); ++k)
    for (size_t j = 1; j < n; ++j)
      for (size_t i = k - 1; i < j; ++i) {
        double v = std::max(best[k - 1][i], span(i, j));
        if (v < best[k][j]) {
          best[k][j] = v;
          from[k][j] = i;
        }
      }
  std::vector<int64_t> cuts;
  for (size_t k = static_cast<size_t>(count), j = n - 1; k > 0; --k) {
    j = from[k][j];
    cuts.push_back(pos[j]);
  }
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

Expected<std::vector<int64_t>> pipelineCuts(const ir::Graph &graph,
                                            const PipelineOptions &options) {
  NNSC_RETURN_IF_ERROR(checkPipelineOptions(options));
  auto starts = pivotStarts(graph, options.pivots);
  if (!starts)
    return starts.status();
  return balancedCuts(nodeCosts(graph), *starts, options.stages * options.virtualStages);
}

Status applyPipeline(const ir::Graph &graph, const PipelineOptions &options, proto::Plan &plan) {
  auto cuts = pipelineCuts(graph, options);
  if (!cuts)
    return cuts.status();
  applyPipelineCuts(options, *cuts, plan);
  return Status::ok();
}

void applyPipelineCuts(const PipelineOptions &options, const std::vector<int64_t> &cuts,
                       proto::Plan &plan) {
  const int S = options.stages, V = options.virtualStages, T = plan.plan_ngpus();
  plan.clear_stages();
  for (int k = 0; k < S * V; ++k) {
    proto::Stage *stage = plan.add_stages();
    stage->set_id(k);
    for (int d = 0; d < T; ++d)
      stage->add_devices((k % S) * T + d);
  }
  int k = 0;
  for (proto::NodePlan &np : *plan.mutable_nodes()) {
    while (k + 1 < S * V && np.node() >= cuts[static_cast<size_t>(k) + 1])
      ++k;
    np.set_stage(k);
    for (int &d : *np.mutable_devices())
      d += (k % S) * T;
  }
  plan.set_plan_ngpus(S * T);
  plan.set_runtime_ngpus(plan.runtime_ngpus() * S);
  plan.set_schedule(options.schedule);
}

int physicalStages(const proto::Plan &plan) {
  std::set<std::vector<int>> sets;
  for (const proto::Stage &s : plan.stages()) {
    std::vector<int> d(s.devices().begin(), s.devices().end());
    std::sort(d.begin(), d.end());
    sets.insert(d);
  }
  return std::max<int>(1, static_cast<int>(sets.size()));
}

Status checkPipelineStages(const proto::Plan &plan, const ir::Graph &graph) {
  std::map<int, std::set<int>> devices;
  for (const proto::Stage &s : plan.stages())
    devices[s.id()] = {s.devices().begin(), s.devices().end()};
  for (const proto::Stage &s : plan.stages())
    if (s.devices_size() != plan.stages(0).devices_size())
      return errorf("stage {} has {} devices but stage {} has {}; pipeline stages must be "
                    "equally wide",
                    s.id(), s.devices_size(), plan.stages(0).id(), plan.stages(0).devices_size());
  std::vector<int> stageOfTensor(graph.tensors().size(), -1);
  std::vector<int64_t> producer(graph.tensors().size(), -1);
  for (const ir::Node &node : graph.nodes()) {
    const proto::NodePlan &np = plan.nodes(static_cast<int>(node.id));
    for (int d : np.devices())
      if (!devices[np.stage()].count(d))
        return errorf("node {} ({}) is in stage {} but placed on device {}, which the stage "
                      "does not hold",
                      node.id, node.op, np.stage(), d);
    for (int64_t in : node.inputs) {
      int from = stageOfTensor[static_cast<size_t>(in)];
      if (from > np.stage())
        return errorf("{} in stage {} reads tensor %{} from {} in the later stage {}; stages "
                      "must follow the graph's order",
                      describeNode(node), np.stage(), in,
                      describeNode(graph.nodes()[static_cast<size_t>(producer[size_t(in)])]),
                      from);
    }
    for (int64_t out : node.outputs) {
      stageOfTensor[static_cast<size_t>(out)] = np.stage();
      producer[static_cast<size_t>(out)] = node.id;
    }
  }
  return Status::ok();
}

} // namespace nnsc::plan
