#pragma once
/// Analytic cost of one operator part: FLOPs and bytes moved, forward and
/// backward, from the shapes the part gets; what its backward keeps alive
/// (saved tensors); and its time on a device (roofline plus launch floor).
///
/// Every op of the op library (Ops/OpRegistry.h) has a cost class. Ops
/// with a formula of their own: linear, matmul/mm/bmm, addmm/baddbmm/addmv,
/// einsum, outer/dot, convolutions (transposed too), scaled_dot_product_
/// attention, softmax/log_softmax, layer/rms/group/batch/instance norm,
/// embedding, cross_entropy/nll and the other losses, pooling, upsampling.
/// The rest fall into their class (elementwise, reduction, view, data
/// movement, index/scatter, creation) by a table keyed by op name.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nnsc/Cost/DeviceSpec.h"
#include "nnsc/IR/Graph.h"

namespace nnsc::cost {

enum class CostClass {
  Matmul,       ///< linear, matmul, bmm, addmm, einsum, ...
  Conv,         ///< convolutions
  Attention,    ///< scaled_dot_product_attention
  Softmax,      ///< softmax, log_softmax
  Norm,         ///< layer/rms/group/batch/instance norm
  Embedding,    ///< embedding
  Loss,         ///< cross_entropy, nll, mse, ...
  Elementwise,  ///< arithmetic, activations, comparisons, dropout
  Reduction,    ///< sum, mean, var, cumsum, sort, ...
  Pool,         ///< pooling, upsampling
  View,         ///< views: no data moves
  DataMovement, ///< cat, copies, contiguous, pad, repeat, ...
  Index,        ///< gather/scatter families, advanced indexing
  Creation,     ///< arange, zeros, rand, ...: outputs only
};

const char *costClassName(CostClass c);

/// The class of `op` ("aten::gelu", "aten::add_": in-place forms share their
/// op's class), or nullopt for an op the cost model does not know.
std::optional<CostClass> costClassOf(const std::string &op);

/// One tensor of a part: its local shape and dtype, whether a gradient flows
/// into it (inputs) and whether it is a parameter/buffer (not an activation).
struct TensorInfo {
  ir::Shape shape;
  ir::DType dtype = ir::DType::Float32;
  bool needsGrad = false;
  bool isState = false;

  double bytes() const;
  double numel() const;
};

/// A node part as the cost model sees it.
struct OpShapes {
  const ir::Node *node = nullptr; ///< op name and non-tensor arguments
  std::vector<TensorInfo> inputs; ///< one per node input
  std::vector<TensorInfo> outputs;
};

/// Work of one pass: floating-point operations, bytes read and written, and
/// kernels launched. `matmul` marks FLOP-bound tensor-core work.
struct Work {
  double flops = 0;
  double bytes = 0;
  int kernels = 0;
  bool matmul = false;
  double randomDraws = 0; ///< random numbers drawn (DeviceSpec::randomRate)
  /// A batched product's smallest per-batch dim (min of m, n, k): priced at
  /// DeviceSpec::batchedMatmulEfficiency. 0: one large GEMM (linear, mm).
  double batchedDim = 0;
  /// The op's kind in DeviceSpec::vectorOps (nullptr: none) and what it
  /// counts: elements and rows of the work.
  const char *vectorKind = nullptr;
  double elements = 0, rows = 0;
  bool backward = false; ///< the backward's figures of the kind
};

/// What the backward needs kept from the forward, besides parameters.
struct Saved {
  std::vector<int> inputs;  ///< node input indices saved
  std::vector<int> outputs; ///< node output indices saved
  double extraBytes = 0;    ///< tensors made inside the op (mask, mean/rstd, lse)
  /// Elements of a dropout mask among extraBytes, counted there at one byte
  /// each (CUDA's fused dropout keeps a bool mask). LibTorch's CPU dropout
  /// keeps a mask in the input's dtype instead: the runtime adds the rest.
  double maskElements = 0;
};

struct OpCost {
  CostClass cls = CostClass::Elementwise;
  Work forward;
  Work backward; ///< empty when no input needs a gradient
  Saved saved;   ///< empty when no input needs a gradient
};

/// Counts `part`. Preconditions: costClassOf(part.node->op) has a value, or
/// the op is costed as elementwise over its tensors.
OpCost opCost(const OpShapes &part);

/// Seconds of `work` on `device`: max(flops / (peak * efficiency), bytes /
/// (bandwidth * memory efficiency)) + kernels * launch floor. Matmul work
/// runs at peakFlops(dtype) * efficiency.matmul (float32 at the tf32 rate
/// when device.tf32); other work on the vector units at the float32 rate *
/// efficiency.matmul.
double workSeconds(const Work &work, ir::DType dtype, const DeviceSpec &device);

/// For every tensor of `graph`: whether a gradient flows into it (a
/// trainable parameter, or a floating-point output of a node with such an
/// input). Indexed by tensor id.
std::vector<bool> gradientFlow(const ir::Graph &graph);

} // namespace nnsc::cost
