#include "nnsc/Ops/OpRegistry.h"

#include "FixedAnnotations.h"
#include "rules/Rules.h"

namespace nnsc::ops {

OpRegistry OpRegistry::builtin() {
  OpRegistry registry;
  rules::registerLinearRules(registry);
  rules::registerElementwiseRules(registry);
  rules::registerReductionRules(registry);
  rules::registerViewRules(registry);
  rules::registerShapeRules(registry);
  rules::registerIndexRules(registry);
  rules::registerAdvancedIndexRules(registry);
  rules::registerWindowRules(registry);
  rules::registerCreationRules(registry);
  rules::registerNormRules(registry);
  rules::registerLossRules(registry);
  rules::registerAttentionConvRules(registry);
  return registry;
}

void OpRegistry::add(const std::string &op, AnnotationRule rule) { rules_[op] = std::move(rule); }

void OpRegistry::addFixed(const std::string &op, std::vector<std::string> annotations) {
  rules_[op] = FixedAnnotations{std::move(annotations)};
}

const AnnotationRule *OpRegistry::find(const std::string &op) const {
  auto it = rules_.find(op);
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::ops() const {
  std::vector<std::string> names;
  for (const auto &entry : rules_)
    names.push_back(entry.first);
  return names;
}

} // namespace nnsc::ops
