#pragma once
// Small graphs built by hand for Plan and Transform tests.

#include <string>
#include <vector>

#include "nnsc/IR/Graph.h"

namespace nnsc::testgraphs {

/// Appends tensors and nodes with one call each.
class Builder {
public:
  ir::Graph graph;

  int64_t input(const std::string &name, ir::Shape shape, ir::DType dtype = ir::DType::Float32) {
    int64_t id = add(name, std::move(shape), dtype, ir::TensorKind::Input, false);
    graph.inputs.push_back(id);
    return id;
  }
  int64_t param(const std::string &name, ir::Shape shape) {
    return add(name, std::move(shape), ir::DType::Float32, ir::TensorKind::Param, true);
  }
  int64_t buffer(const std::string &name, ir::Shape shape, ir::DType dtype = ir::DType::Float32) {
    return add(name, std::move(shape), dtype, ir::TensorKind::Buffer, false);
  }
  /// A node with one output of `shape`; returns the output's tensor id.
  int64_t op(const std::string &name, std::vector<int64_t> inputs, ir::Shape shape,
             const std::string &anno, const std::string &module = "",
             ir::DType dtype = ir::DType::Float32) {
    int64_t out = add("", std::move(shape), dtype, ir::TensorKind::Activation, false);
    ir::Node n;
    n.op = name;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    for (size_t i = 0; i < n.inputs.size(); ++i)
      n.args.push_back({"in" + std::to_string(i), ir::TensorRef{static_cast<int32_t>(i)}});
    if (!anno.empty())
      n.annotations = {anno};
    n.modulePath = module;
    n.loc = {"model.py", static_cast<int>(graph.nodes().size()) + 10, 1};
    graph.addNode(n);
    return out;
  }
  /// Marks `tensor` as the graph's (first) output and loss.
  void loss(int64_t tensor) {
    graph.outputs = {tensor};
    graph.lossOutput = 0;
  }

private:
  int64_t add(const std::string &name, ir::Shape shape, ir::DType dtype, ir::TensorKind kind,
              bool grad) {
    ir::Tensor t;
    t.name = name;
    t.shape = std::move(shape);
    t.dtype = dtype;
    t.kind = kind;
    t.requiresGrad = grad;
    return graph.addTensor(t);
  }
};

constexpr const char *kLinear = "* k+, n k+ -> * n";

/// x[8, 16] -> fc1 (w1 [32, 16]) -> gelu -> fc2 (w2 [16, 32]) -> sum -> loss [1].
/// The loss node's annotation `a+ b+ -> 1` lets it split by value.
inline ir::Graph mlp() {
  Builder b;
  int64_t x = b.input("x", {8, 16});
  int64_t w1 = b.param("fc1.weight", {32, 16});
  int64_t w2 = b.param("fc2.weight", {16, 32});
  int64_t h = b.op("aten::linear", {x, w1}, {8, 32}, kLinear, "fc1");
  int64_t g = b.op("aten::gelu", {h}, {8, 32}, "a b -> a b", "act");
  int64_t y = b.op("aten::linear", {g, w2}, {8, 16}, kLinear, "fc2");
  int64_t l = b.op("aten::sum", {y}, {1}, "a+ b+ -> 1", "loss");
  b.loss(l);
  b.graph.name = "HandMLP";
  return b.graph;
}

/// A linear layer whose forward keeps running statistics in two buffers:
/// r = neg(stat.mean) (read first, returned), y = fc(x), m = mean of y over
/// the batch, stat.mean <- stat.mean + m, stat.count <- stat.count + 1,
/// loss = sum(y). Tensors: x 0, fc.weight 1, stat.mean 2, stat.count 3.
inline ir::Graph runningStats() {
  Builder b;
  int64_t x = b.input("x", {4, 8});
  int64_t w = b.param("fc.weight", {16, 8});
  int64_t mean = b.buffer("stat.mean", {16});
  int64_t count = b.buffer("stat.count", {}, ir::DType::Int64);
  int64_t r = b.op("aten::neg", {mean}, {16}, "a -> a", "stat");
  int64_t y = b.op("aten::linear", {x, w}, {4, 16}, kLinear, "fc");
  int64_t m = b.op("aten::mean", {y}, {16}, "a^ b -> b", "stat");
  int64_t newMean = b.op("aten::add", {mean, m}, {16}, "a, a -> a", "stat");
  int64_t newCount = b.op("aten::add", {count}, {}, "", "stat", ir::DType::Int64);
  int64_t l = b.op("aten::sum", {y}, {1}, "a+ b+ -> 1", "loss");
  b.graph.outputs = {l, r};
  b.graph.lossOutput = 0;
  b.graph.stateUpdates = {{mean, newMean}, {count, newCount}};
  b.graph.name = "RunningStats";
  return b.graph;
}

} // namespace nnsc::testgraphs
