#pragma once
/// The graph as nnsc-run executes it in mixed precision, for the cost model
/// (docs/cost-model.md): the same nodes and tensors, each tensor in the dtype
/// it has at run time. Every float32 parameter, buffer and input becomes the
/// 16-bit dtype (MixedPrecision converts them when the shards load), and
/// each node's float32 outputs follow its floating inputs as PyTorch's type
/// promotion does (16-bit unless a dimensioned float32 tensor meets them),
/// except:
///   - an explicit dtype argument (x.to(torch.float32), sum(dtype=...),
///     zeros(dtype=...)) keeps the traced dtype, and type_as takes its
///     second input's;
///   - a node without floating tensor inputs (a creation op, an int cast)
///     keeps the traced dtype;
///   - the loss operators (Ops/MixedPrecisionOps.h), and a log_softmax whose
///     every use is one, compute in float32 (precision.loss_dtype fp32: their
///     inputs are upcast first), so their outputs are float32;
///   - the matmuls and convolutions compute in the 16-bit dtype (their
///     float32 inputs are cast down first, as autocast does), so their
///     outputs are 16-bit.
/// Costs priced from the view read their dtypes: 16-bit matmul peaks and
/// bytes, float32 log-probabilities saved by a cross-entropy. Plans made on
/// the view keep the original graph's fingerprint (the dtypes are the only
/// difference).

#include "nnsc/Cost/Memory.h"
#include "nnsc/IR/Graph.h"

namespace nnsc::cost {

/// `graph` with the dtypes of `precision`; a plain copy for fp32.
ir::Graph atPrecision(const ir::Graph &graph, Precision precision);

} // namespace nnsc::cost
