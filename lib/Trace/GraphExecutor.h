#pragma once
// Executes an inlined TorchScript graph node by node and records the tensor
// operations it performs as nnsc IR. Private to the Trace library.

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/script.h>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::trace {

/// How a view tensor was made from its parent (which may itself be a view):
/// the recorded view node, replayed on the parent's newest value when an
/// in-place write elsewhere in the family makes this one stale, and inverted
/// (slice → slice_scatter, …) to carry a write through the view back to it.
struct ViewInfo {
  at::Tensor parent;            ///< the tensor this one was made from
  std::optional<ir::Node> node; ///< nullopt: same elements and shape as the parent
  size_t parentInput = 0;       ///< index of the parent in node->inputs
  size_t output = 0;            ///< which of node's outputs this view is
  int64_t version = 0;          ///< the family version its IR id reflects
};

/// Maps each module instance's class type to its path ("transformer.h.0").
/// Traced archives give every instance its own class type.
struct ModuleIndex {
  std::unordered_map<std::string, std::string> pathOfType;
};
ModuleIndex buildModuleIndex(const torch::jit::Module &module);

/// A conversion to a named dtype: aten::to given one (x.float(),
/// x.to(torch.float32)). It is recorded even where the float32 trace makes
/// it a no-op: mixed precision runs it as a conversion. type_as(other) and
/// to(other) are not: a no-op one is dropped as before. Their `other` lends
/// only a dtype, yet a plan would have to lay it out like the input (or
/// gather it) to feed it; and in a float32 trace `other` is often the
/// float32 tensor itself (torch.jit.trace binds Llama's h.type_as(x) to
/// h = x.float()), so the cast does nothing in any precision. The next
/// matmul casts its input down all the same (Runtime/Program.h).
bool isDtypeCast(const c10::FunctionSchema &schema, const std::vector<c10::IValue> &inputs);

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

  /// Keeps a copy of every recorded node output and constant, by IR id, as
  /// LibTorch computed it (cpu mode): the self-check's reference values.
  void keepSnapshots(std::unordered_map<int64_t, at::Tensor> *snapshots) { snapshots_ = snapshots; }

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

  // Functionalization (Functionalize.cpp): views, in-place writes through
  // them, and the buffers the forward updates.
  void noteViews(const ir::Node &n, const std::vector<at::Tensor> &tensorInputs,
                 const std::vector<at::Tensor> &tensorOutputs);
  void noteIdentityView(const at::Tensor &out, const at::Tensor &parent);
  Status propagateWrite(torch::jit::Node *node, const at::Tensor &written, const ir::Node &writer);
  Expected<int64_t> scatterIntoParent(const ViewInfo &view, int64_t parentId, int64_t valueId,
                                      const ir::Node &writer);
  void refreshView(const c10::TensorImpl *impl);
  const c10::TensorImpl *rootOf(const c10::TensorImpl *impl) const;
  std::vector<int64_t> recordSyntheticNode(ir::Node n, const ir::Node &site,
                                           const std::vector<int64_t> &outputsLike);
  Expected<c10::OperatorName> functionalTwin(torch::jit::Node *node,
                                             const c10::FunctionSchema &schema);
  void recordStateUpdates();
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
  std::unordered_map<const c10::TensorImpl *, ViewInfo> views_;
  std::unordered_map<const c10::TensorImpl *, int64_t> familyVersion_; // keyed by root
  std::unordered_map<int64_t, at::Tensor> *snapshots_ = nullptr;
  std::vector<std::pair<int64_t, at::Tensor>> buffers_;              // IR id, exec tensor
  std::unordered_map<const c10::TensorImpl *, int64_t> paramOfExec_; // exec impl → param id
};

/// Module path, module class and source location of a graph node.
void describeNode(const torch::jit::Node *node, const ModuleIndex &index, ir::Node &out);

ir::DType fromScalarType(c10::ScalarType t);
c10::ScalarType toScalarType(ir::DType t);

/// The first line of `s` (LibTorch's messages go on with a backtrace).
std::string firstLine(const std::string &s);

} // namespace nnsc::trace
