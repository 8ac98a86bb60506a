#include "nnsc/CodeGen/RankLayout.h"

#include <regex>
#include <set>

#include <fmt/format.h>

#include "Literals.h"

namespace nnsc::codegen {

ir::Shape ShardSpec::shape() const {
  ir::Shape s;
  for (size_t d = 0; d < start.size(); ++d)
    s.push_back(stop[d] - start[d]);
  return s;
}

namespace {

// Names the program itself uses; an input may not take them.
bool isReservedName(const std::string &name) {
  static const std::set<std::string> names = {"torch",  "nnsc",  "device", "Tensor",
                                              "Device", "Tuple", "List",   "float",
                                              "int",    "bool",  "str",    "annotate"};
  static const std::regex generated("[ptcr][0-9]+");
  return names.count(name) || std::regex_match(name, generated);
}

ShardSpec wholeShard(const ir::Tensor &t, std::string localName, bool constant) {
  ShardSpec s;
  s.tensor = t.id;
  s.localName = std::move(localName);
  s.constant = constant;
  s.start.assign(t.shape.size(), 0);
  s.stop = t.shape;
  return s;
}

Status checkWholePlan(const ir::Graph &graph, const proto::Plan &plan) {
  if (plan.plan_ngpus() != 1)
    return errorf("error: plans spanning {} devices per copy (policy '{}') need the partition "
                  "pass, which nnsc-codegen does not have yet; data-parallel plans "
                  "(plan_ngpus 1) are supported",
                  plan.plan_ngpus(), plan.policy());
  for (const proto::NodePlan &np : plan.nodes())
    if (np.num() > 1)
      return errorf("error: node {} ({}) is split into {} parts; nnsc-codegen supports only "
                    "plans that run every node whole",
                    np.node(), graph.nodes()[static_cast<size_t>(np.node())].op, np.num());
  return Status::ok();
}

void addShards(const ir::Graph &graph, const std::vector<int64_t> &nodes, RankLayout &layout) {
  for (const ir::Tensor &t : graph.tensors())
    if (t.kind == ir::TensorKind::Param || t.kind == ir::TensorKind::Buffer)
      layout.shards.push_back(wholeShard(t, fmt::format("p{}", layout.shards.size()), false));
  // Constants with dims travel as data; 0-dim ones are written inline.
  std::set<int64_t> constants;
  auto note = [&](int64_t id) {
    if (graph.tensor(id).kind == ir::TensorKind::Constant && !graph.tensor(id).shape.empty())
      constants.insert(id);
  };
  for (int64_t n : nodes)
    for (int64_t in : graph.nodes()[static_cast<size_t>(n)].inputs)
      note(in);
  for (int64_t out : graph.outputs)
    note(out);
  for (int64_t c : constants)
    layout.shards.push_back(wholeShard(graph.tensor(c), fmt::format("c{}", c), true));
}

void addInputs(const ir::Graph &graph, RankLayout &layout) {
  std::set<std::string> used;
  for (int64_t id : graph.inputs) {
    const ir::Tensor &t = graph.tensor(id);
    std::string name = pyIdentifier(t.name);
    while (isReservedName(name) || used.count(name))
      name += "_";
    used.insert(name);
    layout.inputs.push_back({id, name, t.shape, t.shape.empty() ? -1 : 0});
  }
}

} // namespace

Expected<RankLayout> layoutRank(const ir::Graph &graph, const proto::Plan &plan, int rank) {
  NNSC_RETURN_IF_ERROR(checkWholePlan(graph, plan));
  if (rank < 0 || rank >= plan.runtime_ngpus())
    return errorf("error: rank {} is outside 0..{}", rank, plan.runtime_ngpus() - 1);
  RankLayout layout;
  layout.rank = rank;
  layout.worldSize = plan.runtime_ngpus();
  layout.planNgpus = plan.plan_ngpus();
  layout.planDevice = rank % plan.plan_ngpus();
  layout.dpSize = plan.runtime_ngpus() / plan.plan_ngpus();
  layout.dpRank = rank / plan.plan_ngpus();
  for (const proto::NodePlan &np : plan.nodes())
    for (int d : np.devices())
      if (d == layout.planDevice)
        layout.nodes.push_back(np.node());
  addShards(graph, layout.nodes, layout);
  addInputs(graph, layout);
  layout.outputs = graph.outputs;
  layout.lossOutput = graph.lossOutput;
  return layout;
}

} // namespace nnsc::codegen
