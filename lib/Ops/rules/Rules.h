#pragma once
/// Registration of the built-in rules, one function per operator family.

#include "nnsc/Ops/OpRegistry.h"

namespace nnsc::ops::rules {

/// linear, matmul, mm, bmm, baddbmm, addmm, einsum, outer, dot.
void registerLinearRules(OpRegistry &registry);
/// Broadcasting arithmetic and comparisons, unary math, activations, dropout,
/// casts and copies, *_like creators.
void registerElementwiseRules(OpRegistry &registry);
/// sum, mean, max/min, amax/amin, var/std, norm, argmax, cumsum, softmax, topk.
void registerReductionRules(OpRegistry &registry);
/// view, reshape, flatten, unflatten: merged-dim annotations from shapes.
void registerViewRules(OpRegistry &registry);
/// permute, transpose, squeeze/unsqueeze, expand, repeat, split family, cat/stack.
void registerShapeRules(OpRegistry &registry);
/// slice, select, index_select, narrow, gather, tril/triu, embedding, one_hot.
void registerIndexRules(OpRegistry &registry);
/// index (advanced indexing), index_put, take_along_dim, slice_scatter,
/// select_scatter.
void registerAdvancedIndexRules(OpRegistry &registry);
/// repeat_interleave, unfold (sliding windows), im2col.
void registerWindowRules(OpRegistry &registry);
/// arange, ones, zeros, full, empty, rand, randn, ...: outputs only.
void registerCreationRules(OpRegistry &registry);
/// layer_norm, rms_norm, batch_norm, group_norm.
void registerNormRules(OpRegistry &registry);
/// cross_entropy_loss, nll_loss, mse_loss, l1_loss, binary_cross_entropy, ...
void registerLossRules(OpRegistry &registry);
/// conv1d/2d/3d, pooling, scaled_dot_product_attention.
void registerAttentionConvRules(OpRegistry &registry);

} // namespace nnsc::ops::rules
