#pragma once
/// Private helpers shared by the op rules: shape and argument access, fresh
/// identifier names and annotation text.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/IR/Graph.h"

namespace nnsc::ops::rules {

/// The dims of one tensor's annotation, e.g. {"a", "k+", "64"}. An empty list
/// stands for `?` (a replicate-only tensor, e.g. a 0-dim one).
using Dims = std::vector<std::string>;

/// Shape of input / output `i` of `node`.
const ir::Shape &inShape(const ir::Graph &graph, const ir::Node &node, size_t i);
const ir::Shape &outShape(const ir::Graph &graph, const ir::Node &node, size_t i);
size_t inRank(const ir::Graph &graph, const ir::Node &node, size_t i);

/// Integer argument `name`; nullopt when absent, None or not an integer.
std::optional<int64_t> intArg(const ir::Node &node, std::string_view name);
/// Integer-list argument `name` (a single integer reads as a one-element list).
std::optional<std::vector<int64_t>> intListArg(const ir::Node &node, std::string_view name);
std::optional<bool> boolArg(const ir::Node &node, std::string_view name);
std::optional<std::string> strArg(const ir::Node &node, std::string_view name);

/// `dim` counted from 0 (a negative one from the end); nullopt when out of range.
std::optional<size_t> normDim(int64_t dim, size_t rank);
/// normDim over a list; nullopt when any is out of range. Sorted, unique.
std::optional<std::vector<size_t>> normDims(const std::vector<int64_t> &dims, size_t rank);

/// Generates identifiers "a", "b", ..., "z", "a1", ... skipping `reserved`.
class NameGen {
public:
  explicit NameGen(std::set<std::string> reserved = {}) : reserved_(std::move(reserved)) {}
  std::string next();
  /// `n` fresh names.
  Dims take(size_t n);

private:
  std::set<std::string> reserved_;
  size_t counter_ = 0;
};

/// Numerals for every dim of `shape` ("8 256").
Dims numerals(const ir::Shape &shape);
/// `dims` with `suffix` ("^" or "+") appended to each dim that is an
/// identifier (numerals stay as they are).
Dims withSuffix(Dims dims, std::string_view suffix);
/// Appends `suffix` to dims[i] if that dim is an identifier.
void addSuffix(Dims &dims, size_t i, std::string_view suffix);
bool isNumeral(std::string_view dim);

/// The dims of a 0-dim tensor that takes part in a split: `()` (an empty
/// list is `?`, replicate-only). See Ops/Annotation.h.
Dims scalarDims();

/// `dims` marked as an addend (Ops/Annotation.h): "+a b"; an empty list (a
/// 0-dim tensor) gives "+()".
Dims addendDims(Dims dims);

/// "a b c", or "?" for an empty list.
std::string shapeStr(const Dims &dims);
/// The annotation text "in0, in1 -> out0" in OpAnno::text()'s canonical form.
std::string annoStr(const std::vector<Dims> &ins, const std::vector<Dims> &outs);

/// The annotation of `shape` broadcast against the output dims `out` (whose
/// shape is `outShape`): aligned right, a size-1 dim where the output is not 1
/// becomes "1". Returns {} (= `?`) for a 0-dim shape; nullopt when `shape`
/// does not broadcast to `outShape`.
std::optional<Dims> broadcastDims(const ir::Shape &shape, const ir::Shape &outShape,
                                  const Dims &out);

/// A one-candidate result.
std::vector<std::string> single(std::string anno);

} // namespace nnsc::ops::rules
