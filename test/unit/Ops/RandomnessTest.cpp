// Which nodes draw random values (ops::drawsRandomValues).
#include "../CatchCompat.h"

#include "nnsc/Ops/Randomness.h"

using namespace nnsc;

namespace {

ir::Node node(const std::string &op, std::vector<ir::Argument> args = {}) {
  ir::Node n;
  n.op = op;
  n.args = std::move(args);
  return n;
}

} // namespace

TEST_CASE("random ops: dropout, bernoulli, fills, creators and attention with dropout draw") {
  for (const char *op :
       {"aten::dropout", "aten::dropout_", "aten::native_dropout", "aten::feature_dropout",
        "aten::alpha_dropout", "aten::bernoulli", "aten::bernoulli_", "aten::rand",
        "aten::randn_like", "aten::randint", "aten::randperm", "aten::uniform_", "aten::normal",
        "aten::exponential_", "aten::multinomial", "aten::rrelu_with_noise"})
    CHECK(ops::drawsRandomValues(node(op)));
  CHECK(ops::drawsRandomValues(
      node("aten::dropout", {{"input", ir::TensorRef{0}}, {"p", 0.2}, {"train", true}})));
  CHECK(ops::drawsRandomValues(
      node("aten::scaled_dot_product_attention", {{"dropout_p", 0.1}, {"is_causal", true}})));
}

TEST_CASE("random ops: switched off, or not random, draw nothing") {
  CHECK_FALSE(ops::drawsRandomValues(node("aten::dropout", {{"p", 0.2}, {"train", false}})));
  CHECK_FALSE(ops::drawsRandomValues(node("aten::dropout", {{"p", 0.0}, {"train", true}})));
  CHECK_FALSE(ops::drawsRandomValues(node("aten::rrelu", {{"training", false}})));
  CHECK_FALSE(ops::drawsRandomValues(
      node("aten::scaled_dot_product_attention", {{"dropout_p", 0.0}, {"is_causal", true}})));
  for (const char *op : {"aten::linear", "aten::randomize", "aten::add_", "aten::zeros_like",
                         "nnsc::rand", "aten::empty_like", "aten::softmax"})
    CHECK_FALSE(ops::drawsRandomValues(node(op)));
}
