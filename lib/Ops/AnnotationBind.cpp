// bindShapes: '*' expansion, rank checks, identifier sizes, output inference.
#include "nnsc/Ops/AnnotationSplit.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::ops {
namespace {

/// Every identifier that is not the leading member of its dim somewhere
/// (nnScaler freezes these everywhere; we split them interleaved on request).
std::set<std::string> nonLeadingIdents(const OpAnno &anno) {
  std::set<std::string> out;
  for (const auto *side : {&anno.inputs, &anno.outputs})
    for (const ShapeAnno &shape : *side)
      for (const DimAnno &dim : shape.dims) {
        size_t lead = 0;
        while (lead < dim.idents.size() && dim.idents[lead].numeric && dim.idents[lead].value == 1)
          ++lead;
        for (size_t k = lead + 1; k < dim.idents.size(); ++k)
          if (!dim.idents[k].numeric)
            out.insert(dim.idents[k].name);
      }
  return out;
}

class Binder {
public:
  Binder(const OpAnno &anno, const std::vector<ir::Shape> &ins, const std::vector<ir::Shape> &outs)
      : ins_(ins), outs_(outs) {
    b_.anno = anno;
    b_.inputShapes = ins;
  }

  Expected<BoundAnno> run(const std::map<std::string, int64_t> &known) {
    NNSC_RETURN_IF_ERROR(checkCounts());
    NNSC_RETURN_IF_ERROR(expandEllipsis());
    NNSC_RETURN_IF_ERROR(checkInputRanks());
    collectRoles();
    for (const auto &[name, size] : known)
      if (b_.roles.count(name))
        NNSC_RETURN_IF_ERROR(setSize(name, size, "the known sizes"));
    NNSC_RETURN_IF_ERROR(bindLoneDims());
    NNSC_RETURN_IF_ERROR(bindMergedDims());
    NNSC_RETURN_IF_ERROR(inferOutputs());
    return std::move(b_);
  }

private:
  Status checkCounts() const;
  Status expandEllipsis();
  Status ellipsisRankOf(size_t input, int &rank) const;
  std::vector<ShapeAnno> expandSide(const std::vector<ShapeAnno> &side) const;
  Status checkInputRanks() const;
  void collectRoles();
  Status setSize(const std::string &name, int64_t size, const std::string &where);
  Status bindLoneDims();
  Status bindMergedDims();
  /// Binds or checks one merged dim; `progress` is set when it binds a member.
  Status bindMerged(const DimAnno &dim, int64_t size, const std::string &where, bool &progress,
                    std::vector<std::string> &unknown);
  Status inferOutputs();

  const std::vector<ir::Shape> &ins_, &outs_;
  BoundAnno b_;
  std::map<std::string, std::string> origin_; ///< where each size came from
};

Status Binder::checkCounts() const {
  if (ins_.size() != b_.anno.inputs.size())
    return errorf("the annotation has {} inputs but the op has {}", b_.anno.inputs.size(),
                  ins_.size());
  if (!outs_.empty() && outs_.size() != b_.anno.outputs.size())
    return errorf("the annotation has {} outputs but the op has {}", b_.anno.outputs.size(),
                  outs_.size());
  return Status::ok();
}

Status Binder::ellipsisRankOf(size_t i, int &rank) const {
  const ShapeAnno &shape = b_.anno.inputs[i];
  rank = static_cast<int>(ins_[i].size()) - static_cast<int>(shape.dims.size() - 1);
  if (rank >= 0)
    return Status::ok();
  return errorf("input {} has rank {} but its annotation '{}' needs at least {} dims", i,
                ins_[i].size(), shapeText(shape), shape.dims.size() - 1);
}

Status Binder::expandEllipsis() {
  int seenAt = -1;
  for (size_t i = 0; i < b_.anno.inputs.size(); ++i) {
    const ShapeAnno &shape = b_.anno.inputs[i];
    bool hasStar = false;
    for (const DimAnno &dim : shape.dims)
      hasStar = hasStar || dim.ellipsis;
    if (!hasStar || shape.unknown)
      continue;
    int rank = 0;
    NNSC_RETURN_IF_ERROR(ellipsisRankOf(i, rank));
    if (seenAt >= 0 && rank != b_.ellipsisRank)
      return errorf("'*' stands for {} dims in input {} {} but {} dims in input {} {}",
                    b_.ellipsisRank, seenAt, ir::shapeString(ins_[seenAt]), rank, i,
                    ir::shapeString(ins_[i]));
    b_.ellipsisRank = rank;
    seenAt = seenAt < 0 ? static_cast<int>(i) : seenAt;
  }
  b_.expanded.inputs = expandSide(b_.anno.inputs);
  b_.expanded.outputs = expandSide(b_.anno.outputs);
  return Status::ok();
}

std::vector<ShapeAnno> Binder::expandSide(const std::vector<ShapeAnno> &side) const {
  std::vector<ShapeAnno> out;
  for (const ShapeAnno &shape : side) {
    ShapeAnno e;
    e.unknown = shape.unknown;
    e.addend = shape.addend;
    for (const DimAnno &dim : shape.dims) {
      if (!dim.ellipsis) {
        e.dims.push_back(dim);
        continue;
      }
      for (int j = 0; j < b_.ellipsisRank; ++j) {
        DimIdent id = dim.idents.front();
        id.name = fmt::format("*{}", j);
        e.dims.push_back(DimAnno{{id}, false});
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status Binder::checkInputRanks() const {
  for (size_t i = 0; i < ins_.size(); ++i) {
    const ShapeAnno &shape = b_.expanded.inputs[i];
    if (!shape.unknown && shape.dims.size() != ins_[i].size())
      return errorf("input {} has rank {} but its annotation '{}' has {} dims", i, ins_[i].size(),
                    shapeText(b_.anno.inputs[i]), shape.dims.size());
  }
  return Status::ok();
}

void Binder::collectRoles() {
  for (const auto *side : {&b_.expanded.inputs, &b_.expanded.outputs})
    for (const ShapeAnno &shape : *side)
      for (const DimAnno &dim : shape.dims)
        for (const DimIdent &id : dim.idents) {
          b_.roles.emplace(id.name, id.numeric ? DimRole::Frozen : id.role);
          if (id.numeric)
            b_.sizes[id.name] = id.value;
        }
  b_.nonLeading = nonLeadingIdents(b_.expanded);
}

Status Binder::setSize(const std::string &name, int64_t size, const std::string &where) {
  auto [it, isNew] = b_.sizes.emplace(name, size);
  if (isNew) {
    origin_[name] = where;
    return Status::ok();
  }
  if (it->second == size)
    return Status::ok();
  if (origin_.count(name) == 0) // a numeral
    return errorf("{}: the fixed size {} does not match size {}", where, name, size);
  return errorf("{}: '{}' is {} here but {} in {}", where, name, size, it->second, origin_[name]);
}

// Lone dims of the inputs, then of the outputs when their shapes are given
// (the members of a merged input dim, `(c d) -> c d`, are known from there).
Status Binder::bindLoneDims() {
  for (size_t i = 0; i < ins_.size(); ++i) {
    const ShapeAnno &shape = b_.expanded.inputs[i];
    for (size_t d = 0; d < shape.dims.size() && !shape.unknown; ++d)
      if (!shape.dims[d].merged())
        NNSC_RETURN_IF_ERROR(setSize(shape.dims[d].idents[0].name, ins_[i][d],
                                     fmt::format("input {} dim {}", i, d)));
  }
  for (size_t o = 0; o < outs_.size(); ++o) {
    const ShapeAnno &shape = b_.expanded.outputs[o];
    if (shape.unknown || shape.dims.size() != outs_[o].size())
      continue;                                    // inferOutputs reports the rank mismatch
    for (size_t d = 0; d < shape.dims.size(); ++d) // known sizes: inferOutputs checks them
      if (!shape.dims[d].merged() && !b_.sizes.count(shape.dims[d].idents[0].name))
        NNSC_RETURN_IF_ERROR(setSize(shape.dims[d].idents[0].name, outs_[o][d],
                                     fmt::format("output {} dim {}", o, d)));
  }
  return Status::ok();
}

Status Binder::bindMerged(const DimAnno &dim, int64_t size, const std::string &where,
                          bool &progress, std::vector<std::string> &unknown) {
  int64_t product = 1;
  unknown.clear();
  for (const DimIdent &id : dim.idents) {
    auto it = b_.sizes.find(id.name);
    if (it == b_.sizes.end())
      unknown.push_back(id.name);
    else if (__builtin_mul_overflow(product, it->second, &product))
      return errorf("{}: the sizes of {} multiply past 64 bits", where, dimText(dim));
  }
  if (unknown.empty() && product != size)
    return errorf("{}: {} multiplies to {} but the dim has size {}", where, dimText(dim), product,
                  size);
  if (unknown.size() != 1)
    return Status::ok();
  if (product == 0 || size % product != 0)
    return errorf("{}: size {} of {} is not divisible by {}, the product of its known members",
                  where, size, dimText(dim), product);
  progress = true;
  return setSize(unknown[0], size / product, where);
}

Status Binder::bindMergedDims() {
  // Repeat until nothing changes: a member bound by one merged dim can make
  // another merged dim solvable.
  bool progress = true;
  std::string stuck;
  while (progress) {
    progress = false;
    stuck.clear();
    for (size_t i = 0; i < ins_.size(); ++i) {
      const ShapeAnno &shape = b_.expanded.inputs[i];
      for (size_t d = 0; d < shape.dims.size() && !shape.unknown; ++d) {
        if (!shape.dims[d].merged())
          continue;
        std::vector<std::string> unknown;
        std::string where = fmt::format("input {} dim {}", i, d);
        NNSC_RETURN_IF_ERROR(bindMerged(shape.dims[d], ins_[i][d], where, progress, unknown));
        if (unknown.size() > 1 && stuck.empty())
          stuck =
              fmt::format("{}: cannot infer '{}' of {} from size {}; give all but one of "
                          "them as known sizes",
                          where, fmt::join(unknown, "', '"), dimText(shape.dims[d]), ins_[i][d]);
      }
    }
  }
  return stuck.empty() ? Status::ok() : Status::error(stuck);
}

Status Binder::inferOutputs() {
  for (size_t o = 0; o < b_.expanded.outputs.size(); ++o) {
    const ShapeAnno &shape = b_.expanded.outputs[o];
    ir::Shape inferred;
    for (size_t d = 0; d < shape.dims.size() && !shape.unknown; ++d) {
      int64_t size = 1;
      for (const DimIdent &id : shape.dims[d].idents) {
        auto it = b_.sizes.find(id.name);
        if (it == b_.sizes.end())
          return errorf("output {} dim {}: the size of '{}' is unknown", o, d, id.name);
        if (__builtin_mul_overflow(size, it->second, &size))
          return errorf("output {} dim {}: the sizes of {} multiply past 64 bits", o, d,
                        dimText(shape.dims[d]));
      }
      inferred.push_back(size);
    }
    if (!outs_.empty() && !shape.unknown && outs_[o] != inferred)
      return errorf("output {} has shape {} but the annotation '{}' gives {}", o,
                    ir::shapeString(outs_[o]), shapeText(b_.anno.outputs[o]),
                    ir::shapeString(inferred));
    b_.outputShapes.push_back(std::move(inferred));
  }
  return Status::ok();
}

} // namespace

Expected<BoundAnno> bindShapes(const OpAnno &anno, const std::vector<ir::Shape> &inputs,
                               const std::vector<ir::Shape> &outputs,
                               const std::map<std::string, int64_t> &known) {
  return Binder(anno, inputs, outputs).run(known);
}

Expected<BoundAnno> bindFirstMatch(const std::vector<OpAnno> &candidates,
                                   const std::vector<ir::Shape> &inputs,
                                   const std::vector<ir::Shape> &outputs,
                                   const std::map<std::string, int64_t> &known) {
  std::string why;
  for (const OpAnno &anno : candidates) {
    Expected<BoundAnno> bound = bindShapes(anno, inputs, outputs, known);
    if (bound)
      return bound;
    why += fmt::format("\n  '{}': {}", anno.text(), bound.status().message());
  }
  return Status::error("no candidate annotation matches the shapes" +
                       (why.empty() ? std::string(" (there are no candidates)") : why));
}

} // namespace nnsc::ops
