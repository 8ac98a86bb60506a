// Text form of a partitioned graph's communication (CommReport.h).
#include "nnsc/Transform/CommReport.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::transform {

namespace {

std::string groupsText(const std::vector<std::vector<int>> &groups) {
  std::string out;
  for (const std::vector<int> &g : groups)
    out += fmt::format("{}[{}]", out.empty() ? "" : " ", fmt::join(g, ","));
  return out;
}

std::string nodeText(const ir::Node &node) {
  return fmt::format("node {} {} ({})", node.id, node.op,
                     node.modulePath.empty() ? "<top>" : node.modulePath);
}

// Where an adapter's tensor comes from.
std::string sourceText(const ir::Graph &graph, int64_t tensor) {
  const ir::Tensor &t = graph.tensor(tensor);
  for (const ir::Node &node : graph.nodes())
    if (std::find(node.outputs.begin(), node.outputs.end(), tensor) != node.outputs.end())
      return "from " + nodeText(node);
  return fmt::format("{} '{}'", ir::tensorKindName(t.kind), t.name);
}

std::string readersText(const ir::Graph &graph, const Adapter &a) {
  std::vector<std::string> out;
  for (const auto &[node, input] : a.readers)
    out.push_back(
        fmt::format("{} input {}", nodeText(graph.nodes()[static_cast<size_t>(node)]), input));
  return fmt::format("{}", fmt::join(out, ", "));
}

const char *megatronName(const CommOp &op) {
  if (op.forward == Primitive::AllReduce && op.backward == Primitive::Identity)
    return " (Megatron g)";
  if (op.forward == Primitive::Identity && op.backward == Primitive::AllReduce)
    return " (Megatron f)";
  return "";
}

void printAdapter(const ir::Graph &graph, const Adapter &a, size_t index, std::ostream &os) {
  const ir::Tensor &t = graph.tensor(a.tensor);
  os << fmt::format("  adapter {}: %{} {}{} {} -> {} on [{}]\n", index, t.id,
                    ir::dtypeName(t.dtype), ir::shapeString(t.shape), a.producer.str(),
                    a.consumer.str(), fmt::join(a.consumer.devices(), ","));
  os << fmt::format("      {}; read by {}\n", sourceText(graph, a.tensor), readersText(graph, a));
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const CommOp &op = a.ops[i];
    os << fmt::format("    {}. {} -> {}: forward {}, backward {}{}\n", i + 1, formatCommOp(op),
                      ir::shapeString(op.outShape), primitiveName(op.forward),
                      a.needsGrad ? primitiveName(op.backward) : "none (no gradient)",
                      a.needsGrad ? megatronName(op) : "");
  }
}

using Counts = std::map<std::string, int>;

std::string countsText(const Counts &counts) {
  if (counts.empty())
    return "none";
  std::vector<std::string> parts;
  for (const auto &[name, n] : counts)
    parts.push_back(fmt::format("{} {}", n, name));
  return fmt::format("{}", fmt::join(parts, ", "));
}

void printLayers(const ir::Graph &graph, const PartitionedGraph &pg, std::ostream &os) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<Counts, Counts>> layers;
  for (const Adapter &a : pg.adapters) {
    const ir::Node &reader = graph.nodes()[static_cast<size_t>(a.readers.front().first)];
    std::string layer = layerOf(reader.modulePath);
    if (!layers.count(layer))
      order.push_back(layer);
    auto &[fwd, bwd] = layers[layer];
    for (const CommOp &op : a.ops) {
      if (!isLocal(op.forward))
        ++fwd[primitiveName(op.forward)];
      if (a.needsGrad && !isLocal(op.backward))
        ++bwd[primitiveName(op.backward)];
    }
  }
  os << "  per layer (collectives; local splits and identities not counted):"
     << (order.empty() ? " none\n" : "\n");
  for (const std::string &layer : order)
    os << fmt::format("    {}: forward {}; backward {}\n", layer, countsText(layers[layer].first),
                      countsText(layers[layer].second));
}

void printReducers(const ir::Graph &graph, const PartitionedGraph &pg, std::ostream &os) {
  std::map<std::string, int> kinds;
  for (const GradReducer &r : pg.reducers) {
    std::string how = r.devices.size() == 1 ? "one device"
                      : r.reduce == GradReduce::Sum
                          ? fmt::format("sum over [{}]", fmt::join(r.devices, ","))
                          : fmt::format("average over [{}]", fmt::join(r.devices, ","));
    ++kinds[how];
  }
  std::vector<std::string> parts;
  for (const auto &[how, n] : kinds)
    parts.push_back(fmt::format("{} {}", n, how));
  os << fmt::format("  gradient reducers ({} parameter shards): {}\n", pg.reducers.size(),
                    parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, "; ")));
}

void printLoss(const PartitionedGraph &pg, std::ostream &os) {
  const LossInfo &loss = pg.loss;
  if (loss.tensor < 0) {
    os << "  loss: none\n";
    return;
  }
  std::vector<std::string> parts;
  for (const LossPart &p : loss.parts)
    parts.push_back(fmt::format("device {} {} x {:g}", p.device, p.slice.str(), p.scale));
  os << fmt::format("  loss %{} ({}): {}\n", loss.tensor,
                    loss.partial ? "partial: the total is the sum of the scaled parts"
                                 : "whole on every device",
                    fmt::join(parts, ", "));
}

} // namespace

std::string layerOf(const std::string &modulePath) {
  size_t begin = 0;
  while (begin < modulePath.size()) {
    size_t end = modulePath.find('.', begin);
    if (end == std::string::npos)
      end = modulePath.size();
    std::string part = modulePath.substr(begin, end - begin);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos)
      return modulePath.substr(0, end);
    begin = end + 1;
  }
  return "<other>";
}

std::string formatCommOp(const CommOp &op) {
  if (op.op == "reshape")
    return "reshape(local view of the blocks)";
  std::vector<std::string> args;

  static const char *names[][2] = {{"dim", ""}, {"split_dim", "concat_dim"}};
  bool twoArgs = op.args.size() == 2;
  for (size_t i = 0; i < op.args.size() && i < 2; ++i)
    args.push_back(fmt::format("{}={}", names[twoArgs ? 1 : 0][i], op.args[i]));
  args.push_back("group " + groupsText(op.groups));
  return fmt::format("{}({})", op.op, fmt::join(args, ", "));
}

void printCommunication(const ir::Graph &graph, const PartitionedGraph &pg, std::ostream &os) {
  os << fmt::format("communication over {} plan devices: {} adapter{}\n", pg.numDevices,
                    pg.adapters.size(), pg.adapters.size() == 1 ? "" : "s");
  for (size_t i = 0; i < pg.adapters.size(); ++i)
    printAdapter(graph, pg.adapters[i], i, os);
  printLayers(graph, pg, os);
  printReducers(graph, pg, os);
  printLoss(pg, os);
}

} // namespace nnsc::transform
