// Structural rules of an annotation, checked in text order so that the first
// problem a reader would meet is the one reported.
#include "nnsc/Ops/Annotation.h"

#include <map>
#include <set>

#include <fmt/format.h>

namespace nnsc::ops::detail {
namespace {

class Checker {
public:
  /// Checks every tensor of `anno`; false with issue() set on the first problem.
  bool run(const OpAnno &anno) {
    for (size_t i = 0; i < anno.inputs.size(); ++i)
      if (!checkTensor(anno.inputs[i], fmt::format("input {}", i), false))
        return false;
    for (size_t i = 0; i < anno.outputs.size(); ++i)
      if (!checkTensor(anno.outputs[i], fmt::format("output {}", i), true))
        return false;
    return true;
  }
  const AnnoIssue &issue() const { return issue_; }

private:
  bool fail(std::string what, int column) {
    issue_ = {std::move(what), column};
    return false;
  }
  bool checkTensor(const ShapeAnno &shape, const std::string &tensor, bool output);
  bool checkIdent(const DimIdent &id, const std::string &tensor, bool output, bool addend);
  bool checkOutputIdent(const DimIdent &id);

  std::map<std::string, DimIdent> first_; ///< first occurrence of each identifier and '*'
  std::set<std::string> inInputs_;
  std::set<std::string> inTensor_; ///< identifiers of the tensor being checked
  AnnoIssue issue_;
};

bool Checker::checkTensor(const ShapeAnno &shape, const std::string &tensor, bool output) {
  inTensor_.clear();
  for (const DimAnno &dim : shape.dims)
    for (const DimIdent &id : dim.idents)
      if (!id.numeric && !checkIdent(id, tensor, output, shape.addend))
        return false;
  return true;
}

bool Checker::checkIdent(const DimIdent &id, const std::string &tensor, bool output, bool addend) {
  if (!inTensor_.insert(id.name).second) {
    if (id.name == "*")
      return fail(fmt::format("second '*' in {}", tensor), id.column);
    return fail(fmt::format("'{}' appears twice in {}", id.name, tensor), id.column);
  }
  auto [it, isNew] = first_.emplace(id.name, id);
  if (!isNew && it->second.role != id.role)
    return fail(fmt::format("role conflict: '{}' at column {} but '{}'", identText(it->second),
                            it->second.column, identText(id)),
                id.column);
  // An addend is value-split along the reductions; it cannot also be cut by one.
  if (addend && id.role == DimRole::Reduce)
    return fail(fmt::format("the addend {} cannot have the reduction '{}'", tensor, identText(id)),
                id.column);
  if (!output) {
    inInputs_.insert(id.name);
    return true;
  }
  return checkOutputIdent(id);
}

bool Checker::checkOutputIdent(const DimIdent &id) {
  if (id.role == DimRole::Reduce)
    return fail(fmt::format("reduction '{}' cannot appear in an output", identText(id)), id.column);
  if (inInputs_.count(id.name))
    return true;
  if (id.name == "*")
    return fail("output '*' without a '*' in any input", id.column);
  return fail(fmt::format("output identifier '{}' does not appear in any input", id.name),
              id.column);
}

} // namespace

AnnoIssue validateAnnotation(const OpAnno &anno) {
  Checker checker;
  if (checker.run(anno))
    return {};
  return checker.issue();
}

} // namespace nnsc::ops::detail
