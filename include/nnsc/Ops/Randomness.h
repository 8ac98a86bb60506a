#pragma once
/// Operators that draw random values (docs/randomness.md): dropout in its
/// forms, bernoulli, the random fills and samplers, the creators rand,
/// randn, randint, randperm, and attention with dropout_p > 0. Codegen gives the pieces of such an
/// op that a plan splits streams of their own (nnsc.rng_fork / nnsc.rng_join).

#include "nnsc/IR/Graph.h"

namespace nnsc::ops {

/// True when `node` may draw random values when it runs: its operator is a
/// random one and no argument switches the draw off (dropout with train=False
/// or p=0, rrelu outside training, attention with dropout_p=0).
bool drawsRandomValues(const ir::Node &node);

} // namespace nnsc::ops
