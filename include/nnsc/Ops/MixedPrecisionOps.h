#pragma once
/// The operators mixed precision (docs/trainer-config.md) pins to a dtype,
/// whatever dtypes their inputs come in: losses in float32
/// (precision.loss_dtype), matmuls in the 16-bit dtype (as autocast's
/// lower-precision ops). The runtime casts their inputs
/// (Runtime/Program.h) and the cost model prices them so
/// (Cost/PrecisionView.h). Header-only and free of LibTorch, so both sides
/// read the same lists.

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

/// True for the operators autocast runs in its lower-precision dtype that
/// take their tensors as direct arguments: linear, the matmul family,
/// convolutions, prelu and scaled_dot_product_attention (einsum,
/// chain_matmul and multi_dot take a list and are left as they are).
inline bool isLowPrecisionOp(std::string_view op) {
  static constexpr std::array<std::string_view, 21> kOps = {"aten::linear",
                                                            "aten::matmul",
                                                            "aten::mm",
                                                            "aten::bmm",
                                                            "aten::mv",
                                                            "aten::addmm",
                                                            "aten::addbmm",
                                                            "aten::baddbmm",
                                                            "aten::addmv",
                                                            "aten::addr",
                                                            "aten::conv1d",
                                                            "aten::conv2d",
                                                            "aten::conv3d",
                                                            "aten::conv_transpose1d",
                                                            "aten::conv_transpose2d",
                                                            "aten::conv_transpose3d",
                                                            "aten::convolution",
                                                            "aten::_convolution",
                                                            "aten::prelu",
                                                            "aten::scaled_dot_product_attention",
                                                            "aten::conv_tbc"};
  return std::find(kOps.begin(), kOps.end(), op) != kOps.end();
}

/// True for the operators CUDA autocast runs in float32 whatever their inputs'
/// dtype (its fp32 lists, with and without an optional dtype argument), as
/// precision.recipe autocast casts them: pointwise transcendentals, norms,
/// softmax and its relatives, reductions that overflow 16 bits, and the
/// losses. With an explicit dtype argument autocast leaves sum, softmax and
/// their relatives alone; here their inputs are still float32 first.
inline bool isAutocastFloat32Op(std::string_view op) {
  static constexpr std::array<std::string_view, 45> kOps = {"aten::acos",
                                                            "aten::asin",
                                                            "aten::cosh",
                                                            "aten::erfinv",
                                                            "aten::exp",
                                                            "aten::expm1",
                                                            "aten::log",
                                                            "aten::log10",
                                                            "aten::log2",
                                                            "aten::log1p",
                                                            "aten::reciprocal",
                                                            "aten::rsqrt",
                                                            "aten::sinh",
                                                            "aten::tan",
                                                            "aten::pow",
                                                            "aten::softplus",
                                                            "aten::layer_norm",
                                                            "aten::native_layer_norm",
                                                            "aten::group_norm",
                                                            "aten::frobenius_norm",
                                                            "aten::nuclear_norm",
                                                            "aten::norm",
                                                            "aten::cosine_similarity",
                                                            "aten::poisson_nll_loss",
                                                            "aten::cosine_embedding_loss",
                                                            "aten::hinge_embedding_loss",
                                                            "aten::margin_ranking_loss",
                                                            "aten::multilabel_margin_loss",
                                                            "aten::triplet_margin_loss",
                                                            "aten::multi_margin_loss",
                                                            "aten::dist",
                                                            "aten::pdist",
                                                            "aten::cdist",
                                                            "aten::renorm",
                                                            "aten::logsumexp",
                                                            "aten::prod",
                                                            "aten::softmax",
                                                            "aten::_softmax",
                                                            "aten::log_softmax",
                                                            "aten::_log_softmax",
                                                            "aten::cumprod",
                                                            "aten::cumsum",
                                                            "aten::sum",
                                                            "aten::linalg_vector_norm",
                                                            "aten::linalg_matrix_norm"};
  return isLossOp(op) || std::find(kOps.begin(), kOps.end(), op) != kOps.end();
}

} // namespace nnsc::ops
