#include "nnsc/IR/Graph.h"

#include <fmt/format.h>

namespace nnsc::ir {

std::string_view tensorKindName(TensorKind k) {
  switch (k) {
  case TensorKind::Input:
    return "input";
  case TensorKind::Param:
    return "param";
  case TensorKind::Buffer:
    return "buffer";
  case TensorKind::Activation:
    return "activation";
  case TensorKind::Constant:
    return "constant";
  }
  return "?";
}

const Argument *Node::arg(std::string_view n) const {
  for (const auto &a : args)
    if (a.name == n)
      return &a;
  return nullptr;
}

int64_t Node::intArg(std::string_view n, int64_t fallback) const {
  const Argument *a = arg(n);
  if (!a)
    return fallback;
  if (const auto *v = std::get_if<int64_t>(&a->value))
    return *v;
  return fallback;
}

std::string Node::locString() const {
  if (loc.file.empty())
    return "<unknown>";
  return fmt::format("{}:{}", loc.file, loc.line);
}

int64_t Graph::addTensor(Tensor t) {
  t.id = static_cast<int64_t>(tensors_.size());
  tensors_.push_back(std::move(t));
  return tensors_.back().id;
}

int64_t Graph::addNode(Node n) {
  n.id = static_cast<int64_t>(nodes_.size());
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

void Graph::compact(const std::vector<bool> &keepTensor) {
  std::vector<int64_t> remap(tensors_.size(), -1);
  std::vector<Tensor> kept;
  for (auto &t : tensors_) {
    if (!keepTensor[static_cast<size_t>(t.id)])
      continue;
    remap[static_cast<size_t>(t.id)] = static_cast<int64_t>(kept.size());
    t.id = static_cast<int64_t>(kept.size());
    kept.push_back(std::move(t));
  }
  tensors_ = std::move(kept);
  auto fix = [&](std::vector<int64_t> &ids) {
    for (auto &id : ids)
      id = remap[static_cast<size_t>(id)];
  };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    nodes_[i].id = static_cast<int64_t>(i);
    fix(nodes_[i].inputs);
    fix(nodes_[i].outputs);
  }
  fix(inputs);
  fix(outputs);
  for (auto &u : stateUpdates) {
    u.state = remap[static_cast<size_t>(u.state)];
    u.value = remap[static_cast<size_t>(u.value)];
  }
}

} // namespace nnsc::ir
