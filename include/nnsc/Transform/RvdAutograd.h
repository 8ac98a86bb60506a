#pragma once
/// Forward/backward pairs of RVD steps: the differentiable nnsc.* operator
/// codegen emits for a step (lib/Runtime/NnscOps.cpp), and the collective its
/// backward runs on the same groups, member order included.
///
///   forward step        op                                    backward
///   all_reduce V->R     all_reduce                            identity (Megatron g)
///   identity            identity_all_reduce                   all_reduce (Megatron f)
///   all_gather D_k->R   all_gather(dim=k)                     reduce_scatter along k
///   reduce_scatter V->D_k  reduce_scatter(dim=k)              all_gather along k
///   all_to_all D_i->D_j all_to_all(split_dim=j, concat_dim=i) all_to_all D_j->D_i
///   chunk R->D_k        split(dim=k)                          all_gather along k
///   value_split R->V    value_split (member 0 the value,      identity
///                       the others zeros)
///
/// Gradient conventions these pairs assume: gradients reaching the
/// replicated output of all_gather are partial sums, one per replica (as in
/// sequence parallelism); gradients reaching the output of all_reduce,
/// chunk and value_split are whole (value_split feeds an addend to a value
/// split, whose partial-sum outputs each receive the whole gradient).
/// nnScaler also has allgather_split and allreduce_allreduce for the other
/// conventions; they are not offered here.

#include <cstdint>
#include <string>
#include <vector>

#include "nnsc/Transform/RvdPrimitive.h"

namespace nnsc::transform {

struct DifferentiableOp {
  /// The nnsc.* operator name, without the namespace.
  std::string op;
  Primitive forward = Primitive::Identity;
  Primitive backward = Primitive::Identity;
  /// The op's integer arguments before `group`: {dim} for all_gather,
  /// reduce_scatter and split; {split_dim, concat_dim} for all_to_all.
  std::vector<int64_t> args;
};

/// The backward primitive of `forward` in the table above.
Primitive backwardOf(Primitive forward);

/// The operator for `step` (its kind and dims); the groups are the step's.
DifferentiableOp differentiableOp(const RvdStep &step);

} // namespace nnsc::transform
