// Plan primitives: building and resolving one node's split (NodeSplit.h).
#include "nnsc/Plan/NodeSplit.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "nnsc/Ops/Annotation.h"

namespace nnsc::plan {

namespace {

ops::SplitEffect wholeEffect(const ir::Node &node) {
  ops::SplitEffect e;
  e.inputDims.assign(node.inputs.size(), -1);
  e.outputDims.assign(node.outputs.size(), -1);
  e.inputBlocks.assign(node.inputs.size(), 1);
  e.outputBlocks.assign(node.outputs.size(), 1);
  return e;
}

std::vector<ir::Shape> shapesOf(const ir::Graph &graph, const std::vector<int64_t> &ids) {
  std::vector<ir::Shape> shapes;
  for (int64_t id : ids)
    shapes.push_back(graph.tensor(id).shape);
  return shapes;
}

proto::NodePlan basePlan(const ir::Node &node, const std::vector<int> &devices,
                         const std::string &rule) {
  proto::NodePlan np;
  np.set_node(node.id);
  np.set_num(1);
  for (int d : devices)
    np.add_devices(d);
  np.set_stage(0);
  np.set_recompute_group(-1);
  np.set_rule(rule);
  return np;
}

// `node` produces the graph's loss and no node reads it: only the trainer sums
// its per-part values, weighed by their shares.
bool isUnreadLoss(const ir::Graph &graph, const ir::Node &node) {
  if (graph.lossOutput < 0 || graph.lossOutput >= static_cast<int>(graph.outputs.size()))
    return false;
  int64_t loss = graph.outputs[static_cast<size_t>(graph.lossOutput)];
  if (std::find(node.outputs.begin(), node.outputs.end(), loss) == node.outputs.end())
    return false;
  for (const ir::Node &reader : graph.nodes())
    if (std::find(reader.inputs.begin(), reader.inputs.end(), loss) != reader.inputs.end())
      return false;
  return true;
}

} // namespace

std::string describeNode(const ir::Node &node) {

  std::string path = node.modulePath.empty() ? "<top>" : node.modulePath;
  return fmt::format("node {} {} at {} ({})", node.id, node.op, path, node.locString());
}

namespace {

// bindNode's result depends only on the annotations and the shapes, and a
// model repeats both in every layer: the search and the partitioner bind the
// same (op, shapes) thousands of times on an 80-layer model. Per thread,
// bounded: cleared when it grows past kBindMemoLimit entries.
constexpr size_t kBindMemoLimit = 1 << 16;

std::string bindKey(const ir::Graph &graph, const ir::Node &node) {
  std::string key;
  for (const std::string &text : node.annotations)
    key.append(text).push_back('\n');
  auto shapes = [&](const std::vector<int64_t> &ids) {
    for (int64_t id : ids) {
      for (int64_t d : graph.tensor(id).shape)
        key.append(std::to_string(d)).push_back(',');
      key.push_back(';');
    }
    key.push_back('|');
  };
  shapes(node.inputs);
  shapes(node.outputs);
  return key;
}

} // namespace

Status checkAnnotations(const ir::Graph &graph) {
  std::unordered_set<std::string> checked; // annotations and shapes found good (every layer's)
  for (const ir::Node &node : graph.nodes()) {
    if (node.annotations.empty() || !checked.insert(bindKey(graph, node)).second)
      continue;
    for (const std::string &text : node.annotations) {
      auto anno = ops::parseAnnotation(text);
      if (!anno)
        return errorf("node {} ({}): bad annotation '{}': {}", node.id, node.op, text,
                      anno.status().message());
      // nnsc-trace keeps only the candidates that bind to the node's shapes.
      auto bound = ops::bindShapes(*anno, shapesOf(graph, node.inputs), shapesOf(graph, node.outputs));
      if (!bound)
        return errorf("node {} ({}): bad annotation '{}': {}", node.id, node.op, text,
                      bound.status().message());
    }
  }
  return Status::ok();
}

Expected<ops::BoundAnno> bindNode(const ir::Graph &graph, const ir::Node &node) {
  if (node.annotations.empty())
    return errorf("{} is replicate-only (no partition annotation)", node.op);
  thread_local std::unordered_map<std::string, Expected<ops::BoundAnno>> memo;
  std::string key = bindKey(graph, node);
  if (auto it = memo.find(key); it != memo.end())
    return it->second;
  auto candidates = ops::parseCandidates(node.annotations);
  Expected<ops::BoundAnno> bound =
      candidates ? ops::bindFirstMatch(*candidates, shapesOf(graph, node.inputs),
                                       shapesOf(graph, node.outputs))
                 : Expected<ops::BoundAnno>(candidates.status());
  if (memo.size() >= kBindMemoLimit)
    memo.clear();
  memo.emplace(std::move(key), bound);
  return bound;
}

namespace {

// The split a NodePlan names, from the annotation and the shapes alone (what
// resolveSplit adds, checkSplitOutputs, also reads the graph's uses).
Expected<ResolvedSplit> bindSplit(const ir::Graph &graph, const ir::Node &node,
                                  const proto::NodePlan &np) {
  auto bound = bindNode(graph, node);
  if (!bound)
    return bound.status();
  ResolvedSplit r;
  r.ident = np.ident();
  if (r.ident.empty()) {
    auto at = ops::identAt(*bound, np.input(), np.dim());
    if (!at)
      return at.status();
    r.ident = *at;
  }
  auto effect = ops::splitEffect(*bound, r.ident, np.num(), std::max(1, np.interleave()));
  if (!effect)
    return effect.status();
  r.num = np.num();
  r.identSize = bound->sizes.at(r.ident);
  r.effect = effect.take();
  return r;
}

} // namespace

Expected<ResolvedSplit> resolveSplit(const ir::Graph &graph, const ir::Node &node,
                                     const proto::NodePlan &np) {
  if (np.num() <= 1) {
    ResolvedSplit r;
    r.effect = wholeEffect(node);
    return r;
  }
  if (node.annotations.empty())
    return errorf("{} is replicate-only (no partition annotation) but the plan splits it into {}",
                  node.op, np.num());
  // Partitioning and pricing a plan resolve every node's split several
  // times, and every layer repeats the same ones: memoized per thread like
  // bindNode's binding.
  thread_local std::unordered_map<std::string, Expected<ResolvedSplit>> memo;
  std::string key = fmt::format("{}#{}/{}/{}/{}/{}", bindKey(graph, node), np.ident(), np.input(),
                                np.dim(), np.num(), np.interleave());
  auto it = memo.find(key);
  if (it == memo.end()) {
    if (memo.size() >= kBindMemoLimit)
      memo.clear();
    it = memo.emplace(std::move(key), bindSplit(graph, node, np)).first;
  }
  if (!it->second)
    return it->second.status();
  NNSC_RETURN_IF_ERROR(checkSplitOutputs(graph, node, it->second->effect, it->second->ident));
  return *it->second;
}

Status checkSplitOutputs(const ir::Graph &graph, const ir::Node &node,
                         const ops::SplitEffect &effect, const std::string &ident) {
  if (effect.valueSplit || node.outputs.empty())
    return Status::ok();
  for (int d : effect.outputDims)
    if (d >= 0)
      return Status::ok();
  if (isUnreadLoss(graph, node))
    return Status::ok();

  return errorf("dimension '{}' is in none of the op's outputs, so its parts would be taken to "
                "compute equal outputs from different data; annotate it '+' (the outputs are "
                "partial sums) or '^' (never split)",
                ident);
}

Expected<ops::SplitEffect> nodeSplitEffect(const ir::Graph &graph, const ir::Node &node,
                                           const proto::NodePlan &np) {

  auto r = resolveSplit(graph, node, np);
  if (!r)
    return r.status();
  return r->effect;
}

proto::NodePlan replicateNode(const ir::Node &node, const std::vector<int> &devices,
                              const std::string &rule) {
  return basePlan(node, devices, rule);
}

Expected<proto::NodePlan> splitNodeByIdent(const ir::Graph &graph, const ir::Node &node,
                                           const std::string &ident,
                                           const std::vector<int> &devices, const std::string &rule,
                                           int interleave) {
  proto::NodePlan np = basePlan(node, devices, rule);
  np.set_ident(ident);
  np.set_num(static_cast<int>(devices.size()));
  if (interleave > 1)
    np.set_interleave(interleave);
  auto r = resolveSplit(graph, node, np);
  if (!r)
    return r.status().withContext(
        fmt::format("cannot split {} along '{}' into {}", describeNode(node), ident, np.num()));
  return np;
}

Expected<proto::NodePlan> splitNodeByDim(const ir::Graph &graph, const ir::Node &node, int input,
                                         int dim, const std::vector<int> &devices,
                                         const std::string &rule, int interleave) {
  proto::NodePlan np = basePlan(node, devices, rule);
  np.set_input(input);
  np.set_dim(dim);
  np.set_num(static_cast<int>(devices.size()));
  if (interleave > 1)
    np.set_interleave(interleave);
  auto r = resolveSplit(graph, node, np);
  if (!r)
    return r.status().withContext(fmt::format("cannot split {} at input {} dim {} into {}",
                                              describeNode(node), input, dim, np.num()));
  return np;
}

std::vector<int> firstDevices(int n) {
  std::vector<int> out;
  for (int d = 0; d < n; ++d)
    out.push_back(d);
  return out;
}

} // namespace nnsc::plan
