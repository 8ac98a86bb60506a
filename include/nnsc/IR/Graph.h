#pragma once
/// The graph IR: operator nodes over full (logical) tensors.
///
/// Tensor and node ids are their indices in Graph::tensors() / nodes().
/// Nodes are kept in topological order. Every node records the module path,
/// module class and source location it came from, and its candidate
/// partition annotations (nnScaler's dimops grammar, see Ops/Annotation.h).

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "nnsc/IR/Types.h"

namespace nnsc::ir {

enum class TensorKind { Input, Param, Buffer, Activation, Constant };
std::string_view tensorKindName(TensorKind k);

struct Tensor {
  int64_t id = -1;
  std::string name; ///< state_dict name (param/buffer), argument name (input)
  Shape shape;
  DType dtype = DType::Float32;
  bool requiresGrad = false;
  TensorKind kind = TensorKind::Activation;
  std::vector<std::string> aliases; ///< other state_dict names (tied weights)
  std::string data;                 ///< raw bytes of a small Constant
};

struct SourceLoc {
  std::string file;
  int line = 0;
  int col = 0;
};

/// Index into Node::inputs.
struct TensorRef {
  int32_t index = 0;
};
struct TensorListRef {
  std::vector<int32_t> indices; ///< -1: None (an absent entry of a Tensor?[] list)
};
struct NoneValue {};
struct DeviceValue {
  std::string name;
};

/// A non-tensor argument value, or a reference to the node's tensor inputs.
using ArgValue = std::variant<NoneValue, bool, int64_t, double, std::string, std::vector<int64_t>,
                              std::vector<double>, std::vector<bool>, DType, DeviceValue, TensorRef,
                              TensorListRef>;

/// One enclosing module call of a node: the instance's path and class.
struct ModuleFrame {
  std::string path; ///< "transformer.h.3"
  std::string cls;  ///< "Block"
};

struct Argument {
  std::string name;
  ArgValue value;
};

struct Node {
  int64_t id = -1;
  std::string op;       ///< "aten::linear"
  std::string overload; ///< schema overload name, may be empty
  std::vector<int64_t> inputs;
  std::vector<int64_t> outputs;
  std::vector<Argument> args; ///< in schema order
  std::vector<std::string> annotations;
  std::string modulePath;
  std::string moduleClass;
  /// Every module call enclosing the node, outermost first; the last one is
  /// (modulePath, moduleClass). Recompute groups select modules by class
  /// through it. Empty in graphs traced before it was recorded.
  std::vector<ModuleFrame> moduleStack;
  SourceLoc loc;

  /// The argument named `name`, or nullptr.
  const Argument *arg(std::string_view name) const;
  /// Integer argument `name` (or `fallback` if absent / not an int).
  int64_t intArg(std::string_view name, int64_t fallback) const;
  /// "file:line" or "<unknown>".
  std::string locString() const;
};

/// A write to a buffer the forward performs (an in-place update such as
/// BatchNorm's `num_batches_tracked.add_(1)`, made functional by the trace):
/// after the forward, the buffer `state` holds the value of tensor `value`.
struct StateUpdate {
  int64_t state = -1; ///< a Buffer tensor
  int64_t value = -1; ///< the tensor whose value it takes
};

class Graph {
public:
  static constexpr uint32_t kFormatVersion = 1;

  std::string name;
  std::string source;
  std::vector<int64_t> inputs;
  std::vector<int64_t> outputs;
  int32_t lossOutput = -1; ///< index into outputs, or -1
  bool weightsWritten = false;
  std::vector<StateUpdate> stateUpdates; ///< at most one per buffer, in trace order

  const std::vector<Tensor> &tensors() const { return tensors_; }
  std::vector<Tensor> &tensors() { return tensors_; }
  const std::vector<Node> &nodes() const { return nodes_; }
  std::vector<Node> &nodes() { return nodes_; }

  const Tensor &tensor(int64_t id) const { return tensors_.at(static_cast<size_t>(id)); }
  Tensor &tensor(int64_t id) { return tensors_.at(static_cast<size_t>(id)); }

  /// Appends a tensor and returns its id.
  int64_t addTensor(Tensor t);
  /// Appends a node (after all its inputs' producers) and returns its id.
  int64_t addNode(Node n);

  /// Renumbers tensors and nodes densely after removals; `keepTensor[id]`
  /// says which tensors survive. Nodes must already be pruned.
  void compact(const std::vector<bool> &keepTensor);

private:
  std::vector<Tensor> tensors_;
  std::vector<Node> nodes_;
};

} // namespace nnsc::ir
