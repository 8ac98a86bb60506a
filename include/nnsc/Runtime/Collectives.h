#pragma once
/// Out-of-place tensor collectives along a dimension, blocking until done.
/// They back the nnsc.* TorchScript ops (NnscOps.cpp) and serve the trainer
/// (e.g. gathering ZeRO shards). A group of one never communicates. Every
/// member of the group must make the same call.

#include <ATen/core/Tensor.h>

#include "nnsc/Runtime/Comm.h"

namespace nnsc::rt {

/// The reduction of `x` over the group (a new tensor).
Expected<at::Tensor> allReduceTensor(CommBackend &group, const at::Tensor &x,
                                     ReduceOp op = ReduceOp::Sum);

/// Every rank's `x` concatenated along `dim`, in rank order.
Expected<at::Tensor> allGatherTensor(CommBackend &group, const at::Tensor &x, int64_t dim);

/// `x` split into size() equal chunks along `dim`, summed over the group;
/// this rank gets chunk rank(). The dim must divide evenly.
Expected<at::Tensor> reduceScatterTensor(CommBackend &group, const at::Tensor &x, int64_t dim);

/// `x` split into size() chunks along `splitDim`; chunk j goes to rank j and
/// the chunks received are concatenated along `concatDim` in rank order.
Expected<at::Tensor> allToAllTensor(CommBackend &group, const at::Tensor &x, int64_t splitDim,
                                    int64_t concatDim);

/// This rank's chunk of `x` along `dim` (a contiguous copy; no communication).
Expected<at::Tensor> chunkTensor(const CommBackend &group, const at::Tensor &x, int64_t dim);

/// Wall seconds this process spent inside the collectives above (the
/// copies around each included) since the last call; resets the count. The
/// trainer's per-step `comm_s` (metrics.jsonl) is this, taken around the
/// forward and backward.
double takeCollectiveSeconds();

/// Makes sure the nnsc.* operators (TORCH_LIBRARY(nnsc)) are linked into the
/// binary: their registration is a static initializer that a static library
/// would otherwise drop. Program::compile calls it; cheap to call again.
void linkNnscOps();

} // namespace nnsc::rt
