#pragma once
// The per-op table behind costClassOf: class, FLOPs per element forward and
// backward, and what the backward saves, for ops costed by their class.

#include <string>

#include "nnsc/Cost/OpCost.h"

namespace nnsc::cost {

/// What an op's backward keeps from its forward (autograd's SavedVariables).
enum class SaveRule {
  None,        ///< add, sum, views: the backward needs shapes only
  Input,       ///< the first input (gelu, log, clamp, pooling)
  Output,      ///< the first output (relu, exp, sigmoid, tanh, softmax)
  Inputs,      ///< every floating input (pow, losses)
  Operands,    ///< each floating input another input's gradient reads (mul, div:
               ///< autograd keeps `b` for a's gradient only when a needs one, and
               ///< nothing for a product with a Python scalar)
  InputOutput, ///< the first input and the first output (norm, prod, amax)
  Mask,        ///< a one-byte-per-element mask made inside (dropout)
  Indices,     ///< every integer input (gather/index/embedding indices)
};

struct OpTraits {
  CostClass cls = CostClass::Elementwise;
  double fwdFlops = 0; ///< per output element (reductions: per input element)
  double bwdFlops = 0; ///< per element, for each input that needs a gradient
  SaveRule save = SaveRule::None;
  bool differentiable = true; ///< false: comparisons, argmax, creators
  bool random = false;        ///< draws one random number per output element
  /// The kind in DeviceSpec::vectorOps that bounds it on a CPU, or nullptr.
  const char *vector = nullptr;
};

/// The traits of `op` ("aten::" name; a trailing '_' in-place form maps to
/// its op), or nullptr.
const OpTraits *opTraits(const std::string &op);

} // namespace nnsc::cost
