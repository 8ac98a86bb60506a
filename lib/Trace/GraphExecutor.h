#pragma once
// Executes an inlined TorchScript graph node by node and records the tensor
// operations it performs as nnsc IR. Private to the Trace library.

#include <string>
#include <unordered_map>
#include <vector>

#include <torch/script.h>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

/// Maps each module instance's class type to its path ("transformer.h.0").
/// Traced archives give every instance its own class type.
struct ModuleIndex {
  std::unordered_map<std::string, std::string> pathOfType;
};
ModuleIndex buildModuleIndex(const torch::jit::Module &module);

class GraphExecutor {
public:
  /// `meta`: run on the meta device (parameters are replaced by meta tensors).
  GraphExecutor(torch::jit::Module &module, bool meta, ir::Graph &out);

  /// Declares every parameter and buffer of the module as an IR tensor with
  /// its state_dict name (tied tensors get one id and aliases).
  Status declareState();
  /// Binds the forward's arguments (after self) to sample tensors.
  Status bindInputs(torch::jit::Graph &graph, const std::vector<at::Tensor> &values,
                    const std::vector<std::string> &names);
  /// Executes the graph; records IR nodes and the graph outputs.
  Status run(torch::jit::Graph &graph);

  /// The real (non-exec) tensor behind each declared param/buffer IR id.
  const std::unordered_map<int64_t, at::Tensor> &stateTensors() const { return state_; }

private:
  Status runBlock(torch::jit::Block *block);
  Status runNode(torch::jit::Node *node);
  bool runStructural(torch::jit::Node *node);
  Status runGetAttr(torch::jit::Node *node);
  Status runIf(torch::jit::Node *node);
  Status runLoop(torch::jit::Node *node);
  Status runOperator(torch::jit::Node *node);
  Status recordNode(torch::jit::Node *node, const std::vector<c10::IValue> &inputs,
                    const std::vector<c10::IValue> &outputs);
  bool shouldRecord(torch::jit::Node *node, const std::vector<c10::IValue> &inputs,
                    const std::vector<c10::IValue> &outputs) const;
  void fixDeviceArgs(torch::jit::Node *node, std::vector<c10::IValue> &inputs) const;
  int64_t tensorId(const at::Tensor &t, const std::string &hint);
  int64_t addActivation(const at::Tensor &t, const std::string &name);
  Status bindOutputs(torch::jit::Graph &graph);
  Status errorAt(torch::jit::Node *node, const std::string &message) const;
  void set(torch::jit::Value *v, c10::IValue iv);
  c10::IValue get(torch::jit::Value *v) const;

  torch::jit::Module &module_;
  ModuleIndex index_;
  bool meta_;
  ir::Graph &out_;
  std::unordered_map<const torch::jit::Value *, c10::IValue> env_;
  std::unordered_map<const c10::TensorImpl *, int64_t> irOf_;
  std::unordered_map<const c10::TensorImpl *, at::Tensor> execOfState_;
  std::unordered_map<int64_t, at::Tensor> state_;
  std::unordered_map<const c10::TensorImpl *, at::Tensor> constData_; // meta exec → literal
  std::vector<c10::IValue> keepAlive_;                                // keeps impl addresses unique
};

/// Module path, module class and source location of a graph node.
void describeNode(const torch::jit::Node *node, const ModuleIndex &index, ir::Node &out);

ir::DType fromScalarType(c10::ScalarType t);
c10::ScalarType toScalarType(ir::DType t);

} // namespace nnsc::trace
