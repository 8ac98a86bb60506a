// splittableIdents, splitEffect and identAt over a bound annotation.
#include "nnsc/Ops/AnnotationSplit.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::ops {
namespace {

bool hasUnknownOutput(const BoundAnno &bound, size_t &which) {
  for (which = 0; which < bound.expanded.outputs.size(); ++which)
    if (bound.expanded.outputs[which].unknown)
      return true;
  return false;
}

bool dimHas(const DimAnno &dim, const std::string &id) {
  for (const DimIdent &member : dim.idents)
    if (member.name == id)
      return true;
  return false;
}

/// The dim of `shape` that holds `id`, or -1.
int dimHolding(const ShapeAnno &shape, const std::string &id) {
  for (size_t d = 0; d < shape.dims.size(); ++d)
    if (dimHas(shape.dims[d], id))
      return static_cast<int>(d);
  return -1;
}

/// The first occurrence of `id` in the expanded annotation, or nullptr.
const DimIdent *findIdent(const BoundAnno &bound, const std::string &id) {
  for (const auto *side : {&bound.expanded.inputs, &bound.expanded.outputs})
    for (const ShapeAnno &shape : *side)
      for (const DimAnno &dim : shape.dims)
        for (const DimIdent &member : dim.idents)
          if (member.name == id)
            return &member;
  return nullptr;
}

/// How many blocks splitting `id` leaves in `dim`: the product of the sizes
/// of the members left of it, times `interleave`; 1 when `dim` lacks it.
int64_t blocksIn(const BoundAnno &bound, const DimAnno &dim, const std::string &id,
                 int64_t interleave) {
  // The members multiply to the dim's size, which interleave divides, so the
  // product fits in int64 unless some member is 0: then the tensor is empty
  // and any block count describes it; it keeps 1.
  int64_t left = 1;
  for (const DimIdent &member : dim.idents) {
    int64_t next = 0;
    if (member.name == id)
      return __builtin_mul_overflow(left, interleave, &next) ? 1 : next;
    if (__builtin_mul_overflow(left, bound.sizes.at(member.name), &left))
      return 1;
  }
  return 1;
}

/// Per tensor of `side`: the split dim of `id` and its block count.
void effectOn(const BoundAnno &bound, const std::vector<ShapeAnno> &side, const std::string &id,
              int64_t interleave, std::vector<int> &dims, std::vector<int64_t> &blocks) {
  for (const ShapeAnno &shape : side) {
    int d = dimHolding(shape, id);
    dims.push_back(d);
    blocks.push_back(d < 0 ? 1
                           : blocksIn(bound, shape.dims[static_cast<size_t>(d)], id, interleave));
  }
}

Status unknownIdent(const BoundAnno &bound, const std::string &id) {
  std::vector<std::string> ok = splittableIdents(bound);
  if (ok.empty())
    return errorf("unknown dimension '{}'; this op has no splittable dimension", id);
  return errorf("unknown dimension '{}'; expected one of: {}", id, fmt::join(ok, ", "));
}

/// Why `id` cannot be split into `n` parts, or ok.
Status checkSplittable(const BoundAnno &bound, const std::string &id, int n, int64_t interleave) {
  if (n < 1)
    return errorf("cannot split '{}' into {} parts; expected at least 1", id, n);
  if (interleave < 1)
    return errorf("cannot interleave '{}' over {} blocks; expected at least 1", id, interleave);
  const DimIdent *first = findIdent(bound, id);
  if (first == nullptr)
    return unknownIdent(bound, id);
  if (first->numeric)
    return errorf("'{}' is a fixed size and cannot be split", id);
  if (first->role == DimRole::Frozen)
    return errorf("dimension '{}' is frozen (^) and cannot be split", id);
  size_t out = 0;
  if (hasUnknownOutput(bound, out))
    return errorf("output {} is '?': an op with an unknown output can only be replicated", out);
  auto size = bound.sizes.find(id);
  if (size == bound.sizes.end())
    return Status::internal(fmt::format("dimension '{}' has no bound size", id));
  // n * interleave past int64 is more blocks than any size has.
  int64_t blocks = 0;
  bool tooMany = __builtin_mul_overflow(static_cast<int64_t>(n), interleave, &blocks);
  if (interleave > 1 && (tooMany || size->second % blocks != 0))
    return errorf("dimension '{}' has size {}, which is not divisible into {} blocks of {} "
                  "parts",
                  id, size->second, interleave, n);
  if (size->second % n != 0)
    return errorf("dimension '{}' has size {}, which is not divisible into {} parts", id,
                  size->second, n);
  return Status::ok();
}

} // namespace

const DimIdent *leadingIdent(const DimAnno &dim) {
  for (const DimIdent &id : dim.idents)
    if (!(id.numeric && id.value == 1))
      return &id;
  return nullptr;
}

std::vector<std::string> splittableIdents(const BoundAnno &bound) {
  size_t unknownOut = 0;
  if (hasUnknownOutput(bound, unknownOut))
    return {};
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const ShapeAnno &shape : bound.expanded.inputs)
    for (const DimAnno &dim : shape.dims) {
      const DimIdent *lead = leadingIdent(dim);
      if (lead == nullptr || !seen.insert(lead->name).second)
        continue;
      if (bound.roles.at(lead->name) != DimRole::Frozen && !bound.nonLeading.count(lead->name))
        out.push_back(lead->name);
    }
  return out;
}

Expected<SplitEffect> splitEffect(const BoundAnno &bound, const std::string &id, int n,
                                  int64_t interleave) {
  NNSC_RETURN_IF_ERROR(checkSplittable(bound, id, n, interleave));
  SplitEffect effect;
  effect.valueSplit = bound.roles.at(id) == DimRole::Reduce;
  int64_t g = n > 1 ? interleave : 1;
  effectOn(bound, bound.expanded.inputs, id, g, effect.inputDims, effect.inputBlocks);
  effectOn(bound, bound.expanded.outputs, id, g, effect.outputDims, effect.outputBlocks);
  if (n <= 1) // whole: nothing is cut, so nothing is interleaved
    std::fill(effect.inputBlocks.begin(), effect.inputBlocks.end(), 1);
  if (n <= 1)
    std::fill(effect.outputBlocks.begin(), effect.outputBlocks.end(), 1);
  // The outputs are partial sums: an addend must be one too, or every part
  // would add all of it.
  effect.inputValue.assign(effect.inputDims.size(), false);
  for (size_t i = 0; i < effect.inputDims.size() && effect.valueSplit && n > 1; ++i)
    effect.inputValue[i] = bound.expanded.inputs[i].addend && effect.inputDims[i] < 0;
  return effect;
}

Expected<std::string> identAt(const BoundAnno &bound, int inputIndex, int dim) {
  int count = static_cast<int>(bound.expanded.inputs.size());
  if (inputIndex < 0 || inputIndex >= count)
    return errorf("input {} is out of range: the op has {} inputs", inputIndex, count);
  const ShapeAnno &shape = bound.expanded.inputs[inputIndex];
  if (shape.unknown)
    return errorf("input {} is '?' (replicate-only) and has no dims", inputIndex);
  int rank = static_cast<int>(shape.dims.size());
  int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    return errorf("dim {} is out of range for input {} of rank {}", dim, inputIndex, rank);
  const DimIdent *lead = leadingIdent(shape.dims[d]);
  if (lead == nullptr)
    return errorf("input {} dim {} is '{}': fixed sizes only, nothing to split", inputIndex, d,
                  dimText(shape.dims[d]));
  return lead->name;
}

} // namespace nnsc::ops
