#pragma once
/// nnScaler's "dimops" partition annotations: syntax tree, parser, printer.
///
/// An annotation says how an operator's tensors line up dimension by
/// dimension, and so how the operator may be split:
///
///   annotation := tensors '->' tensors          (either side may be empty)
///   tensors    := tensor (',' tensor)*
///   tensor     := '?' | '+'? ('()' | dim+)      (dims separated by spaces)
///   dim        := ident | '(' ident+ ')' | '*' suffix?
///   ident      := (python-identifier | numeral) suffix?
///   suffix     := '+' (reduction) | '^' (frozen)
///
/// Meaning (as in nnScaler's nnscaler/graph/function/dimops.py):
///  - the same identifier in two places has the same size;
///  - plain `n`: splitting n splits every tensor that has n, replicates the rest;
///  - `k+`: splitting k splits the inputs that have k and leaves every output a
///    partial sum (a value split); so `+` identifiers never appear in outputs;
///  - `d^`: never split. A numeral (`1`, `64`) is a fixed size, never split;
///  - `(h d)`: one tensor dim whose size is the product; only the leading
///    identifier (after leading `1`s) may be split, the others are frozen
///    everywhere they appear;
///  - `*`: any number (0..) of dims, the same ones in every tensor that has a
///    `*`; each expanded dim is its own identifier, splittable unless the `*`
///    carries `^` (its suffix applies to every expanded dim);
///  - `?`: a whole tensor (or non-tensor value) that is only ever replicated; an
///    op with a `?` output is replicate-only (its output cannot be related to
///    the split);
///  - `()`: a 0-dim tensor, which has no dims to name. Unlike `?` it lets the
///    op split: split along a `+` identifier, a `()` output is a partial sum;
///    along a plain one, each part computes its own value (say the mean of its
///    share of the batch), which only the graph's loss may do: the partitioner
///    weighs each part by its share (LossInfo in Transform/Partition.h).
///  - `+` before an input's dims (`+n`, `+1`, `+()`): an addend, a tensor the
///    op adds into its outputs (a bias). Split along a `+` identifier the
///    outputs are partial sums, so the parts must add it once in total: it is
///    value-split with them (ValueSplit in Transform/RvdPrimitive.h: one part
///    reads it, the others zeros). Along any other identifier it splits like
///    any input. An addend is an input, not '?', and has no `+` identifier.
/// Candidates: several annotations for one op, tried in order, are written as a
/// vector or in one string separated by `|`.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/Support/Diagnostic.h"
#include "nnsc/Support/Status.h"

namespace nnsc::ops {

/// How a dimension behaves when it is split.
enum class DimRole {
  Spatial, ///< plain: split tensors that have it, replicate the others
  Reduce,  ///< '+': split inputs that have it, outputs become partial sums
  Frozen   ///< '^' (and every numeral): never split
};

/// One identifier inside a dimension.
struct DimIdent {
  std::string name;     ///< identifier, numeral text ("64") or "*"
  bool numeric = false; ///< a numeral: fixed size `value`, role Frozen
  int64_t value = 0;    ///< the size of a numeral; 0 otherwise
  DimRole role = DimRole::Spatial;
  int column = 0; ///< 1-based column in the parsed text; 0 when synthesized

  bool operator==(const DimIdent &o) const {
    return name == o.name && numeric == o.numeric && value == o.value && role == o.role;
  }
};

/// One tensor dimension: a single identifier, a merged group `(h d)` or `*`.
struct DimAnno {
  std::vector<DimIdent> idents; ///< >1 = merged; for '*' one ident named "*"
  bool ellipsis = false;        ///< '*'

  bool merged() const { return idents.size() > 1; }
  bool operator==(const DimAnno &o) const { return idents == o.idents && ellipsis == o.ellipsis; }
};

/// The annotation of one input or output.
struct ShapeAnno {
  std::vector<DimAnno> dims;
  bool unknown = false; ///< '?': replicate-only, dims empty (dims empty and not
                        ///< unknown: a 0-dim tensor, written `()`)
  bool addend = false;  ///< a leading '+': added into the outputs (inputs only)

  bool operator==(const ShapeAnno &o) const {
    return dims == o.dims && unknown == o.unknown && addend == o.addend;
  }
};

/// A whole annotation `inputs -> outputs`.
struct OpAnno {
  std::vector<ShapeAnno> inputs, outputs;

  /// The canonical text: single spaces between dims, ", " between tensors,
  /// " -> " between sides, numerals without suffix. parseAnnotation(text())
  /// gives back an equal OpAnno.
  std::string text() const;
  bool operator==(const OpAnno &o) const { return inputs == o.inputs && outputs == o.outputs; }
};

/// Canonical text of one tensor's annotation ("b l (h d)", "* k+", "?", "+n").
std::string shapeText(const ShapeAnno &shape);
/// Canonical text of one identifier ("k+", "d^", "n", "64").
std::string identText(const DimIdent &id);
/// Canonical text of one dim ("k+", "(h d)", "*", "64").
std::string dimText(const DimAnno &dim);

/// Parses and validates one annotation.
///
/// Besides syntax it enforces nnScaler's structural rules: an identifier at
/// most once per tensor; one role per identifier across the annotation; no
/// `+` identifier in an output; every output identifier appears in some
/// input (numerals excepted); a `*` in an output needs a `*` in an input; at
/// most one `*` per tensor; `*` and `?` never inside `( )`; `?` stands alone;
/// an addend (`+` before a tensor) only among the inputs, never `?`, without
/// a `+` identifier.
/// Errors read "error: <what> at column N", then the text and a caret under
/// the 1-based column of the offending character.
Expected<OpAnno> parseAnnotation(std::string_view text);

/// As parseAnnotation, for text found in a file at `origin` (the position of
/// its first character): errors read "file:line:col: error: <what>" with the
/// column counted in the file, then the text and a caret.
Expected<OpAnno> parseAnnotation(std::string_view text, const SourcePos &origin);

/// Parses candidate annotations separated by '|' ("a b -> a | a b -> b"),
/// in order. Error columns count from the start of the whole text.
Expected<std::vector<OpAnno>> parseCandidates(std::string_view text);

/// Parses each string of `texts` (one annotation each, no '|'), in order.
/// An error is prefixed with "candidate N: " (0-based).
Expected<std::vector<OpAnno>> parseCandidates(const std::vector<std::string> &texts);

namespace detail {
/// A located validation failure, before formatting.
struct AnnoIssue {
  std::string what;
  int column = 0;
};
/// The structural checks of parseAnnotation; empty `what` when valid.
AnnoIssue validateAnnotation(const OpAnno &anno);
} // namespace detail

} // namespace nnsc::ops
