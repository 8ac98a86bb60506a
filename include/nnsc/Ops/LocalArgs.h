#pragma once
/// Rewriting the shape-carrying arguments of an op for the sub-tensors one
/// device holds.
///
/// After partitioning, a device runs a node on local sub-tensors. Most
/// arguments stay as traced (dims, flags, scalars), but some spell out a
/// shape that now differs: view/reshape sizes, expand sizes, split sizes
/// along a partitioned dim, the sizes of creation ops. localizeArgs returns
/// the node's argument list with those replaced by what the local shapes
/// say; everything else is unchanged (layer_norm's normalized_shape is
/// frozen by its annotation, repeat's repeats and flatten's dims do not
/// depend on sizes and are only checked).

#include <vector>

#include "nnsc/IR/Graph.h"
#include "nnsc/Support/Status.h"

namespace nnsc::ops {

/// The shapes of one node's tensors on one device: one per Node::inputs and
/// one per Node::outputs, in the same order.
struct LocalShapes {
  std::vector<ir::Shape> inputs;
  std::vector<ir::Shape> outputs;
};

/// `node`'s arguments for a device whose tensors have `local` shapes (the
/// full shapes are read from `graph`). With every local shape equal to the
/// full one the arguments come back unchanged.
///
///   view / reshape / _unsafe_view   size or shape <- the local output shape
///   expand / broadcast_to           size <- the local output shape
///   split (int split_size)          split_size <- local size of the first piece,
///                                   when the split dim is partitioned
///   split_with_sizes                split_sizes <- local sizes of the pieces, likewise
///   slice / narrow                  on a partitioned dim that is taken whole:
///                                   bounds <- the local dim
///   unflatten                       sizes <- the local output dims
///   slice_scatter                   like slice, for a dim that src covers whole
///   group_norm                      num_groups <- local C / (C / num_groups)
///   native_group_norm               group likewise; N, C <- the local input's
///   arange                          end <- start + local length * step
///   zeros / ones / full / empty /   size <- the local output shape
///   rand / randn / new_* ...
///
/// Errors: shape counts that do not match the node; a slice or narrow that
/// cuts a proper sub-range of a partitioned dim (its local bounds depend on
/// the device's offset); a repeat whose local shapes do not follow from its
/// repeats. Messages name the node's op and source location.
Expected<std::vector<ir::Argument>> localizeArgs(const ir::Graph &graph, const ir::Node &node,
                                                 const LocalShapes &local);

} // namespace nnsc::ops
