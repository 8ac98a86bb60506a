#include "../CatchCompat.h"

#include "HandGraphs.h"
#include "nnsc/Plan/PlanFile.h"

using namespace nnsc;

namespace {

Expected<proto::Plan> applyText(const ir::Graph &g, const std::string &text, int ngpus = 2) {
  auto file = plan::parsePlanFile(text, "p.yaml");
  if (!file)
    return file.status();
  return plan::applyPlanFile(g, *file, ngpus, ngpus);
}

std::string firstLine(const std::string &s) { return s.substr(0, s.find('\n')); }

} // namespace

TEST_CASE("globs match module paths", "[plan][planfile]") {
  CHECK(plan::globMatch("transformer.h.*.attn.c_attn", "transformer.h.11.attn.c_attn"));
  CHECK_FALSE(plan::globMatch("transformer.h.*.attn", "transformer.h.0.attn.c_attn"));
  CHECK(plan::globMatch("*.c_proj", "transformer.h.0.mlp.c_proj"));
  CHECK(plan::globMatch("fc?", "fc2"));
  CHECK(plan::globMatch("*", ""));
  CHECK_FALSE(plan::globMatch("fc?", "fc"));
}

TEST_CASE("plan file rules: first match wins, selectors and-ed, default for the rest",
          "[plan][planfile]") {
  ir::Graph g = testgraphs::mlp();
  auto p = applyText(g, R"(default: follow
rules:
  - module: fc1
    partition: {ident: n}
  - op: aten::linear
    module: [fc2, other]
    partition: {input: 0, dim: 1, num: 2}
  - node: [1, 3]
    partition: replicate
)");
  INFO(p.status().message());
  REQUIRE(p.isOk());
  CHECK(p->policy() == "file");
  CHECK(p->nodes(0).ident() == "n");
  CHECK(p->nodes(0).rule() == "p.yaml:3");
  CHECK(p->nodes(1).num() == 1); // the node rule wins over following
  CHECK(p->nodes(2).input() == 0);
  CHECK(p->nodes(2).dim() == 1);
  CHECK(p->nodes(3).num() == 1);
  CHECK(p->nodes(3).rule() == "p.yaml:8");

  auto follow =
      applyText(g, "default: follow\nrules:\n  - module: fc1\n    partition: {ident: n}\n");
  REQUIRE(follow.isOk());
  CHECK(follow->nodes(1).ident() == "b"); // gelu follows fc1's columns
  CHECK(follow->nodes(1).rule() == "default follow");
  CHECK(follow->nodes(2).ident() == "k"); // fc2 reads them along its contracted dim
}

TEST_CASE("a plan file that splits a frozen dim names the op and its location",
          "[plan][planfile]") {
  testgraphs::Builder b;
  int64_t x = b.input("x", {4, 8});
  b.graph.outputs = {b.op("aten::layer_norm", {x}, {4, 8}, "a b^ -> a b^", "blocks.0.ln")};
  auto p = applyText(b.graph, "rules:\n  - module: blocks.*.ln\n    partition: {ident: b}\n");
  REQUIRE_FALSE(p.isOk());
  CHECK(firstLine(p.status().message()) ==
        "p.yaml:2:5: error: rule 'module blocks.*.ln': cannot split node 0 aten::layer_norm at "
        "blocks.0.ln (model.py:10) along 'b' into 2: dimension 'b' is frozen (^) and cannot be "
        "split");
}

TEST_CASE("plan file errors point at the file position", "[plan][planfile]") {
  ir::Graph g = testgraphs::mlp();
  auto check = [&](const std::string &text, const std::string &expected) {
    auto p = applyText(g, text);
    REQUIRE_FALSE(p.isOk());
    CHECK(firstLine(p.status().message()) == expected);
  };
  check("rules:\n  - module: fc9\n    partition: replicate\n",
        "p.yaml:2:5: error: rule matched no node: module fc9");
  check("rules:\n  - modul: fc1\n    partition: replicate\n",
        "p.yaml:2:5: error: unknown key 'modul' in a rule; expected one of: class, module, node, "
        "nth, op, partition");
  check("plan_ngpu: 2\nrules: []\n",
        "p.yaml:1:1: error: unknown key 'plan_ngpu' in the plan file; expected one of: default, "
        "inputs, plan_ngpus, recompute, rules, zero");
  check("rules:\n  - module: fc1\n    partition: {ident: n, nmu: 2}\n",
        "p.yaml:3:27: error: unknown key 'nmu' in a partition; expected one of: dim, ident, "
        "input, interleave, num");
  check("rules:\n  - module: fc1\n    partition: split\n",
        "p.yaml:3:16: error: unknown partition 'split'; expected a map {ident, num} or {input, "
        "dim, num}, 'replicate' or 'follow'");
  check("rules:\n  - partition: replicate\n",
        "p.yaml:2:5: error: the rule selects nothing; give 'module', 'op', 'node' or 'class'");
  check("rules:\n  - module: fc1\n    partition: {ident: n, num: 4}\n",
        "p.yaml:2:5: error: rule 'module fc1' splits node 0 aten::linear at fc1 (model.py:10) into "
        "4 parts; a node is split over all plan_ngpus (2) devices or replicated");
  check("rules:\n  - module: fc1\n    partition: {ident: q}\n",
        "p.yaml:2:5: error: rule 'module fc1': cannot split node 0 aten::linear at fc1 "
        "(model.py:10) along 'q' into 2: unknown dimension 'q'; expected one of: *0, k, n");
  check("default: sideways\nrules: []\n",
        "p.yaml:1:10: error: unknown default 'sideways'; expected one of: replicate, follow");
  check("rules:\n  - node: -1\n    partition: replicate\n",
        "p.yaml:2:11: error: node must be at least 0; got -1");
}
