#pragma once
/// The loss operators (LossRules.cpp) that mixed precision computes in
/// float32 (docs/trainer-config.md, precision.loss_dtype): the runtime
/// upcasts their inputs (Runtime/Program.h computeLossesInFloat32) and the
/// cost model prices them in float32 (Cost/PrecisionView.h). Header-only and
/// free of LibTorch, so both sides read the same list.

#include <algorithm>
#include <array>
#include <string_view>

namespace nnsc::ops {

/// True for a qualified operator name ("aten::cross_entropy_loss") of a loss.
inline bool isLossOp(std::string_view op) {
  static constexpr std::array<std::string_view, 13> kLosses = {
      "aten::cross_entropy_loss",
      "aten::nll_loss",
      "aten::nll_loss_nd",
      "aten::nll_loss2d",
      "aten::nll_loss_forward",
      "aten::mse_loss",
      "aten::l1_loss",
      "aten::smooth_l1_loss",
      "aten::huber_loss",
      "aten::binary_cross_entropy",
      "aten::binary_cross_entropy_with_logits",
      "aten::soft_margin_loss",
      "aten::kl_div"};
  return std::find(kLosses.begin(), kLosses.end(), op) != kLosses.end();
}

/// True for log_softmax in its two spellings: computed in float32 when every
/// use is a loss (log_softmax + nll_loss is a cross-entropy).
inline bool isLogSoftmax(std::string_view op) {
  return op == "aten::log_softmax" || op == "aten::_log_softmax";
}

} // namespace nnsc::ops
