#pragma once
/// nnsc.recompute: activation recompute of one group of a rank program
/// (docs/recompute.md).
///
///   rc3 = nnsc.recompute("recompute_3", [t19, p2, p3], device)
///
/// calls the program's function recompute_3(t19, p2, p3, device) -> List[Tensor]
/// without recording its autograd graph: only the inputs are kept (weight
/// shards among them, so their gradients flow). In backward it restores the
/// random state of the forward (the device's default generator and the
/// forward index of RngStreams, so dropout and split random ops draw the same
/// values), runs the function again with gradients from detached inputs, and
/// returns the gradients of its inputs. Collectives inside the function run
/// again in that re-run, as Megatron's recompute does. Under no-grad
/// (validation) it just calls the function.
///
/// The function is looked up in the program running the call
/// (Program::current()), which the op keeps for its backward. A group's
/// inputs must not change in place between forward and backward.

namespace nnsc::rt {

/// Makes sure the op's registration is linked (linkNnscOps calls it).
void linkRecomputeOp();

} // namespace nnsc::rt
