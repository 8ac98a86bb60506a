// Forward/backward pairs of RVD steps (see RvdAutograd.h).
#include "nnsc/Transform/RvdAutograd.h"

namespace nnsc::transform {

Primitive backwardOf(Primitive forward) {
  switch (forward) {
  case Primitive::AllReduce:
  case Primitive::ValueSplit:
    return Primitive::Identity;
  case Primitive::Identity:
    return Primitive::AllReduce;
  case Primitive::AllGather:
    return Primitive::ReduceScatter;
  case Primitive::ReduceScatter:
  case Primitive::Chunk:
    return Primitive::AllGather;
  case Primitive::AllToAll:
    return Primitive::AllToAll;
  }
  return Primitive::Identity;
}

DifferentiableOp differentiableOp(const RvdStep &step) {
  DifferentiableOp op{primitiveName(step.kind), step.kind, backwardOf(step.kind), {}};
  switch (step.kind) {
  case Primitive::Identity:
    op.op = "identity_all_reduce";
    break;
  case Primitive::AllGather:
    op.args = {step.fromDim()};
    break;
  case Primitive::ReduceScatter:
    op.args = {step.toDim()};
    break;
  case Primitive::Chunk:
    op.op = "split";
    op.args = {step.toDim()};
    break;
  case Primitive::AllToAll:
    op.args = {step.toDim(), step.fromDim()};
    break;
  case Primitive::AllReduce:
  case Primitive::ValueSplit:
    break;
  }
  return op;
}

} // namespace nnsc::transform
