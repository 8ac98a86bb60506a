#pragma once
/// Rough per-device memory of a plan: what each plan device holds for one
/// model copy during training with AdamW.

#include <cstdint>
#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/plan.pb.h"

namespace nnsc::plan {

/// Bytes one plan device holds. Parameters and buffers count once per
/// device that runs a node reading them (the device's part when the node
/// splits them); gradients and AdamW states (exp_avg and exp_avg_sq, float32)
/// count for trainable parameters; activations sum every node output the
/// device produces for one micro-batch (all kept for backward: an upper bound).
struct DeviceMemory {
  int device = 0;
  int64_t paramElements = 0; ///< parameters and buffers
  double paramBytes = 0;
  double gradBytes = 0;
  double optimizerBytes = 0;
  double activationBytes = 0;
  double total() const { return paramBytes + gradBytes + optimizerBytes + activationBytes; }
};

/// One entry per plan device 0 .. plan_ngpus-1. `plan` must pass validatePlan.
std::vector<DeviceMemory> estimateMemory(const ir::Graph &graph, const proto::Plan &plan);

} // namespace nnsc::plan
