// The op table: one row per op of the op library (lib/Ops/rules). FLOP
// counts per element are those of the usual CUDA kernels: one per
// arithmetic operation, transcendental functions counted as a few
// (exp/log/tanh/erf ~4). Ops with a formula of their own (OpFormulas.cpp)
// use only the class and saves from here.
#include "OpTable.h"

#include <map>

namespace nnsc::cost {

namespace {

using C = CostClass;
using S = SaveRule;

struct Row {
  const char *names;
  OpTraits traits;
};

// Several ops per row, separated by spaces.
const Row kRows[] = {
    // Elementwise arithmetic: y = f(a, b).
    {"add sub rsub", {C::Elementwise, 1, 1, S::None, true}},
    {"mul true_divide div", {C::Elementwise, 1, 2, S::Operands, true}},
    {"floor_divide remainder fmod", {C::Elementwise, 1, 2, S::Inputs, true}},
    {"pow float_power atan2 hypot copysign xlogy", {C::Elementwise, 4, 6, S::Inputs, true}},
    {"lerp addcmul addcdiv", {C::Elementwise, 3, 3, S::Inputs, true}},
    {"maximum minimum fmax fmin", {C::Elementwise, 1, 2, S::Inputs, true}},
    {"clamp clamp_min clamp_max clip hardtanh threshold", {C::Elementwise, 2, 2, S::Input, true}},
    {"where masked_fill", {C::Elementwise, 1, 1, S::Indices, true, false, "select"}},
    {"neg negative positive", {C::Elementwise, 1, 1, S::None, true}},
    {"exp exp2 expm1", {C::Elementwise, 4, 1, S::Output, true, false, "exp"}},
    {"log log2 log10 log1p", {C::Elementwise, 4, 2, S::Input, true, false, "exp"}},
    {"reciprocal", {C::Elementwise, 4, 2, S::Input, true}},
    {"sqrt rsqrt", {C::Elementwise, 2, 3, S::Output, true}},
    {"square abs sign sgn", {C::Elementwise, 1, 2, S::Input, true}},
    {"ceil floor round trunc frac", {C::Elementwise, 1, 0, S::None, true}},
    {"sin cos tan asin acos atan sinh cosh erf erfc erfinv",
     {C::Elementwise, 4, 5, S::Input, true, false, "exp"}},
    {"tanh sigmoid", {C::Elementwise, 4, 3, S::Output, true, false, "exp"}},
    {"relu relu6", {C::Elementwise, 1, 1, S::Output, true}},
    {"gelu", {C::Elementwise, 8, 12, S::Input, true, false, "gelu"}},
    {"silu mish softplus log_sigmoid", {C::Elementwise, 5, 8, S::Input, true, false, "exp"}},
    {"elu selu celu leaky_relu hardswish hardsigmoid", {C::Elementwise, 3, 3, S::Input, true}},
    {"nan_to_num", {C::Elementwise, 2, 1, S::Input, true}},
    // Comparisons and logic: no gradient.
    {"eq ne lt gt le ge greater greater_equal less less_equal not_equal logical_and logical_or "
     "logical_xor bitwise_and bitwise_or bitwise_xor __and__ __or__ __xor__ logical_not "
     "bitwise_not isnan isinf isfinite",
     {C::Elementwise, 1, 0, S::None, false}},
    // Dropout: draw, compare, scale; the backward multiplies by the mask.
    {"dropout native_dropout alpha_dropout feature_dropout feature_alpha_dropout",
     {C::Elementwise, 3, 1, S::Mask, true, true}},
    // Random fills and creators: outputs only.
    {"bernoulli uniform exponential log_normal cauchy geometric normal random rand_like "
     "randn_like rand randn randint randperm",
     {C::Creation, 2, 0, S::None, false, true}},
    {"zeros_like ones_like empty_like full_like fill zero", {C::Creation, 0, 0, S::None, false}},
    {"arange ones zeros full empty empty_strided linspace logspace "
     "eye tensor scalar_tensor new_zeros new_ones new_full new_empty new_tensor one_hot",
     {C::Creation, 0, 0, S::None, false}},
    // Copies: read the input, write the output; the backward copies back.
    {"contiguous clone copy _to_copy to type_as narrow_copy flip roll tril triu",
     {C::DataMovement, 0, 0, S::None, true}},
    {"cat concat concatenate stack repeat repeat_interleave constant_pad_nd pad "
     "reflection_pad1d reflection_pad2d reflection_pad3d replication_pad1d replication_pad2d "
     "replication_pad3d im2col",
     {C::DataMovement, 0, 0, S::None, true}},
    // Views: nothing moves.
    {"view reshape flatten unflatten _unsafe_view view_as reshape_as permute transpose t "
     "swapaxes swapdims squeeze unsqueeze expand expand_as broadcast_to broadcast_tensors split "
     "split_with_sizes chunk unsafe_chunk unsafe_split tensor_split unbind narrow select slice "
     "alias detach lift_fresh unfold",
     {C::View, 0, 0, S::None, true}},
    // Gathers and scatters: move the indexed elements and the indices.
    {"index_select gather take_along_dim index", {C::Index, 0, 1, S::Indices, true}},
    {"scatter scatter_add scatter_reduce index_add index_copy index_fill index_put "
     "_index_put_impl slice_scatter select_scatter",
     {C::Index, 1, 1, S::Indices, true}},
    {"embedding", {C::Embedding, 0, 1, S::Indices, true}},
    // Reductions (FLOPs per input element).
    {"sum nansum mean nanmean", {C::Reduction, 1, 0, S::None, true}},
    {"prod", {C::Reduction, 1, 2, S::InputOutput, true}},
    {"amax amin max min aminmax", {C::Reduction, 1, 1, S::InputOutput, true}},
    {"var std var_mean std_mean", {C::Reduction, 3, 3, S::Input, true}},
    {"norm linalg_vector_norm frobenius_norm", {C::Reduction, 2, 2, S::InputOutput, true}},
    {"logsumexp", {C::Reduction, 5, 3, S::InputOutput, true}},
    {"argmax argmin any all", {C::Reduction, 1, 0, S::None, false}},
    {"cumsum", {C::Reduction, 1, 1, S::None, true}},
    {"cumprod logcumsumexp cummax cummin", {C::Reduction, 4, 4, S::InputOutput, true}},
    {"sort argsort topk", {C::Reduction, 1, 1, S::Indices, true}},
    {"softmax _softmax log_softmax _log_softmax",
     {C::Softmax, 5, 4, S::Output, true, false, "softmax"}},
    // Formulas of their own (OpFormulas.cpp): class and saves.
    {"linear matmul mm bmm addmm baddbmm addmv einsum outer ger dot vdot",
     {C::Matmul, 2, 2, S::Inputs, true}},
    {"conv1d conv2d conv3d convolution _convolution conv_transpose conv_transpose1d "
     "conv_transpose2d conv_transpose3d",
     {C::Conv, 2, 2, S::Inputs, true}},
    {"scaled_dot_product_attention", {C::Attention, 0, 0, S::InputOutput, true}},
    {"layer_norm native_layer_norm rms_norm group_norm native_group_norm batch_norm "
     "native_batch_norm instance_norm",
     {C::Norm, 8, 12, S::Input, true, false, "norm"}},
    {"cross_entropy_loss", {C::Loss, 5, 4, S::Indices, true, false, "loss"}},
    {"nll_loss nll_loss2d nll_loss_forward nll_loss_nd", {C::Loss, 5, 4, S::Indices, true}},
    {"mse_loss l1_loss smooth_l1_loss huber_loss soft_margin_loss kl_div binary_cross_entropy "
     "binary_cross_entropy_with_logits",
     {C::Loss, 4, 4, S::Inputs, true}},
    {"max_pool1d max_pool2d max_pool2d_with_indices max_pool3d adaptive_max_pool1d "
     "adaptive_max_pool2d",
     {C::Pool, 1, 1, S::Input, true}},
    {"avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d "
     "adaptive_avg_pool3d",
     {C::Pool, 1, 1, S::None, true}},
    {"upsample_nearest1d upsample_nearest2d upsample_nearest3d _upsample_nearest_exact1d "
     "_upsample_nearest_exact2d _upsample_nearest_exact3d",
     {C::Pool, 1, 1, S::None, true}},
    {"upsample_linear1d upsample_bilinear2d upsample_trilinear3d upsample_bicubic2d",
     {C::Pool, 8, 8, S::None, true}},
};

std::map<std::string, OpTraits> buildTable() {
  std::map<std::string, OpTraits> table;
  for (const Row &row : kRows) {
    std::string names = row.names;
    size_t pos = 0;
    while (pos < names.size()) {
      size_t end = names.find(' ', pos);
      if (end == std::string::npos)
        end = names.size();
      if (end > pos)
        table["aten::" + names.substr(pos, end - pos)] = row.traits;
      pos = end + 1;
    }
  }
  return table;
}

} // namespace

const OpTraits *opTraits(const std::string &op) {
  static const std::map<std::string, OpTraits> table = buildTable();
  auto it = table.find(op);
  if (it == table.end() && op.size() > 1 && op.back() == '_')
    it = table.find(op.substr(0, op.size() - 1)); // the in-place form
  return it == table.end() ? nullptr : &it->second;
}

} // namespace nnsc::cost
