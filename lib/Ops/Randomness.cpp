// Which operators draw random values (Randomness.h).
#include "nnsc/Ops/Randomness.h"

#include <set>
#include <string>

namespace nnsc::ops {

namespace {

// Operator names without the namespace and without a trailing `_`: the
// in-place forms draw as their functional twins do.
const std::set<std::string> &randomOps() {
  static const std::set<std::string> ops = {"dropout",
                                            "native_dropout",
                                            "alpha_dropout",
                                            "feature_dropout",
                                            "feature_alpha_dropout",
                                            "_fused_dropout",
                                            "bernoulli",
                                            "rand",
                                            "rand_like",
                                            "randn",
                                            "randn_like",
                                            "randint",
                                            "randint_like",
                                            "randperm",
                                            "normal",
                                            "normal_functional",
                                            "uniform",
                                            "exponential",
                                            "log_normal",
                                            "cauchy",
                                            "geometric",
                                            "random",
                                            "multinomial",
                                            "poisson",
                                            "rrelu",
                                            "rrelu_with_noise",
                                            "_standard_gamma",
                                            "_sample_dirichlet",
                                            "binomial"};
  return ops;
}

bool flagIs(const ir::Node &node, const char *name, bool value) {
  const ir::Argument *a = node.arg(name);
  return a && std::holds_alternative<bool>(a->value) && std::get<bool>(a->value) == value;
}

bool zeroProbability(const ir::Node &node, const char *name) {
  const ir::Argument *p = node.arg(name);
  return p && std::holds_alternative<double>(p->value) && std::get<double>(p->value) == 0.0;
}

} // namespace

bool drawsRandomValues(const ir::Node &node) {
  size_t sep = node.op.find("::");
  if (sep == std::string::npos || node.op.compare(0, sep, "aten") != 0)
    return false;
  std::string name = node.op.substr(sep + 2);
  if (name.size() > 1 && name.back() == '_')
    name.pop_back();
  // Attention draws its dropout mask inside the kernel when dropout_p > 0.
  if (name.find("scaled_dot_product") != std::string::npos)
    return node.arg("dropout_p") && !zeroProbability(node, "dropout_p");
  if (!randomOps().count(name))
    return false;
  if (flagIs(node, "train", false) || flagIs(node, "training", false))
    return false;
  bool dropoutLike = name.find("dropout") != std::string::npos;
  return !(dropoutLike && zeroProbability(node, "p"));
}

} // namespace nnsc::ops
