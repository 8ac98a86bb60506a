#pragma once
/// Annotations bound to concrete shapes, and what splitting one dimension
/// implies for each tensor of the op (nnScaler's DimSplitEinops default rule).
///
/// Errors from this file are one-line messages without an "error:" prefix or
/// location; the caller adds the node or file they concern (withContext).

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nnsc/IR/Types.h"
#include "nnsc/Ops/Annotation.h"
#include "nnsc/Support/Status.h"

namespace nnsc::ops {

/// An annotation whose identifiers all have sizes.
struct BoundAnno {
  OpAnno anno;     ///< as parsed, '*' included
  OpAnno expanded; ///< one DimAnno per real dim: each '*' replaced by the dims it
                   ///< stands for, named "*0", "*1", ... (same names in every tensor)
  std::map<std::string, int64_t> sizes; ///< every identifier, numerals included
  std::map<std::string, DimRole> roles; ///< effective role: numerals are Frozen
  /// Identifiers that are a non-leading member of some merged dim (`d` in
  /// `(h d)`). nnScaler never splits them; here they split only when asked
  /// by name (an interleaved split, see SplitEffect), never by a policy's
  /// pick (splittableIdents leaves them out).
  std::set<std::string> nonLeading;
  std::vector<ir::Shape> inputShapes;  ///< as given ('?' inputs: whatever was given)
  std::vector<ir::Shape> outputShapes; ///< inferred from sizes; empty for '?' outputs
  int ellipsisRank = 0;                ///< how many dims '*' stands for
};

/// Binds identifier sizes from the shapes of an op's inputs (and checks its
/// outputs). One shape per annotated input, in order; a '?' input's shape is
/// ignored. `outputs` is either empty (not checked) or one shape per output
/// ('?' outputs not checked). `known` gives sizes that shapes cannot tell,
/// such as one member of a merged dim: {"h": 6} for "b l (h d) -> b l h d".
/// '*' expands to the same number of dims (and sizes) in every tensor that has
/// it; merged dims must equal the product of their members (one unknown member
/// is inferred by division); numerals must match. Errors name the tensor, the
/// dim and the conflicting sizes. Names in `known` that the annotation does
/// not use are ignored (like nnScaler's unrelated kwargs).
Expected<BoundAnno> bindShapes(const OpAnno &anno, const std::vector<ir::Shape> &inputs,
                               const std::vector<ir::Shape> &outputs,
                               const std::map<std::string, int64_t> &known = {});

/// Tries `candidates` in order and returns the first that binds; when none
/// does, the error lists each candidate's text and why it failed.
Expected<BoundAnno> bindFirstMatch(const std::vector<OpAnno> &candidates,
                                   const std::vector<ir::Shape> &inputs,
                                   const std::vector<ir::Shape> &outputs,
                                   const std::map<std::string, int64_t> &known = {});

/// The identifiers a policy may pick, in first-appearance order over the
/// expanded inputs: not frozen, not numeric, leading in their dim (after
/// leading '1's) everywhere, not in a '?' input. Empty when some output is '?'.
std::vector<std::string> splittableIdents(const BoundAnno &bound);

/// What splitting one identifier into n equal parts does to each tensor
/// (nnScaler's default rule). A replicated input (-1) is fed whole to every
/// part; in a value split that is only right when the op does not add it to
/// the partial sums. An input the op does add (an addend, `+n` in linear's
/// `* k+, n k+, +n -> * n`) is value-split instead (`inputValue`): the parts
/// read chunks that add up to it, so it is added once in total (nnScaler
/// writes the same as a TransformRule with DimopSplit.V() for the bias).
///
/// Interleaved splits. A split dim is normally cut into n contiguous chunks.
/// It is cut *interleaved over b blocks* when it is viewed as [b, size / b]
/// and the inner part is cut: part i holds, from each of the b blocks, its
/// i-th contiguous chunk (the local tensor is those b chunks, in block
/// order). That happens where the split identifier is not the leading member
/// of a merged dim (`d` in `(h d)`: b = h) and when the split itself asks for
/// `interleave` g > 1 (the identifier viewed as [g, size / g]: a fused
/// q/k/v projection whose n = 3 * C splits each of q, k, v among the parts).
/// Both multiply: b = (product of the members left of the identifier) * g.
struct SplitEffect {
  std::vector<int> inputDims;  ///< per input: the dim index split, or -1 = replicated
  std::vector<int> outputDims; ///< per output: the dim index split, or -1
  /// Per input / output: the block count b of the split dim (1: contiguous;
  /// also 1 where the tensor is not split).
  std::vector<int64_t> inputBlocks, outputBlocks;
  bool valueSplit = false; ///< a reduction: every output is a partial sum (outputDims all -1)
  /// Per input: read as value chunks (an addend in a value split; its
  /// inputDims entry is -1). Empty = none.
  std::vector<bool> inputValue;

  /// True when input `i` is read as value chunks.
  bool valueInput(size_t i) const { return i < inputValue.size() && inputValue[i]; }
};

/// The effect of splitting `id` (an identifier of bound.expanded, e.g. "n" or
/// "*0") into `n` >= 1 parts, interleaved over `interleave` >= 1 blocks of the
/// identifier (see SplitEffect). Errors: unknown identifier (the message lists
/// the splittable ones), numeral, frozen, a '?' output (replicate-only op),
/// size not divisible by n * interleave.
Expected<SplitEffect> splitEffect(const BoundAnno &bound, const std::string &id, int n,
                                  int64_t interleave = 1);

/// The identifier that would be split for "input `inputIndex`, dim `dim`" (as
/// plan files say it): the leading non-'1' member of that expanded dim. A
/// negative `dim` counts from the end. Errors: index or dim out of range, a
/// '?' input. The identifier is returned even when it cannot be split;
/// splitEffect says why.
Expected<std::string> identAt(const BoundAnno &bound, int inputIndex, int dim);

/// The leading splittable member of `dim` (skipping leading numeral '1's);
/// nullptr when the dim has only numerals.
const DimIdent *leadingIdent(const DimAnno &dim);

} // namespace nnsc::ops
