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
        "inputs, micro_batches, plan_ngpus, recompute, rules, schedule, stages, virtual_stages, "
        "zero, zero_ngroups");
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

namespace {

// emb -> h.{0..3} (fc, act) -> a top-level neg after h.1 -> head -> a
// top-level loss: stages cut between the layers.
ir::Graph layers() {
  testgraphs::Builder b;
  int64_t t = b.input("x", {8, 16});
  t = b.op("aten::gelu", {t}, {8, 16}, "a b -> a b", "emb");
  for (int i = 0; i < 4; ++i) {
    int64_t w = b.param("h." + std::to_string(i) + ".fc.weight", {16, 16});
    t = b.op("aten::linear", {t, w}, {8, 16}, testgraphs::kLinear,
             "h." + std::to_string(i) + ".fc");
    t = b.op("aten::gelu", {t}, {8, 16}, "a b -> a b", "h." + std::to_string(i) + ".act");
    if (i == 1)
      t = b.op("aten::neg", {t}, {8, 16}, "a b -> a b", "");
  }
  t = b.op("aten::gelu", {t}, {8, 16}, "a b -> a b", "head");
  b.loss(b.op("aten::sum", {t}, {1}, "a+ b+ -> 1", ""));
  b.graph.name = "HandLayers";
  return b.graph;
}

Expected<proto::Plan> applyStaged(const ir::Graph &g, const std::string &text, int ngpus,
                                  int runtime) {
  auto file = plan::parsePlanFile(text, "p.yaml");
  if (!file)
    return file.status();
  return plan::applyStagedPlanFile(g, *file, ngpus, runtime);
}

} // namespace

TEST_CASE("plan file stages: module globs per stage, top-level ops with the node before",
          "[plan][planfile][pipeline]") {
  ir::Graph g = layers();
  // Nodes: 0 emb, 1-2 h.0, 3-4 h.1, 5 neg, 6-7 h.2, 8-9 h.3, 10 head, 11 loss.
  REQUIRE(g.nodes().size() == 12);
  auto file = plan::parsePlanFile("stages:\n  - [emb, h.0, h.1]\n  - ['h.[23]', h.2, h.3, head]\n"
                                  "rules:\n  - {module: 'h.*.fc', partition: {ident: n}}\n",
                                  "p.yaml");
  REQUIRE(file.isOk());
  auto cuts = plan::planFileStageCuts(g, *file);
  REQUIRE(cuts.isOk());
  CHECK(*cuts == std::vector<int64_t>{0, 6});
  // 2 devices per copy: one per stage; 4 ranks: two copies.
  auto p = plan::applyStagedPlanFile(g, *file, 2, 4);
  REQUIRE(p.isOk());
  CHECK(p->plan_ngpus() == 2);
  CHECK(p->runtime_ngpus() == 4);
  CHECK(p->schedule() == "1f1b");
  REQUIRE(p->stages_size() == 2);
  for (int k = 0; k < 12; ++k) {
    int stage = k < 6 ? 0 : 1;
    CHECK(p->nodes(k).stage() == stage);
    CHECK(std::vector<int>(p->nodes(k).devices().begin(), p->nodes(k).devices().end()) ==
          std::vector<int>{stage});
  }
  // Four devices per copy: the rules split each stage's two.
  auto wide = plan::applyStagedPlanFile(g, *file, 4, 4);
  REQUIRE(wide.isOk());
  CHECK(wide->nodes(6).ident() == "n");
  CHECK(std::vector<int>(wide->nodes(6).devices().begin(), wide->nodes(6).devices().end()) ==
        std::vector<int>{2, 3});
  CHECK(std::vector<int>(wide->nodes(5).devices().begin(), wide->nodes(5).devices().end()) ==
        std::vector<int>{0, 1});
}

TEST_CASE("plan file stages: errors at the stage", "[plan][planfile][pipeline]") {
  ir::Graph g = layers();
  auto check = [&](const std::string &stages, int ngpus, const std::string &expected) {
    auto p = applyStaged(g, stages + "rules: []\n", ngpus, ngpus);
    REQUIRE_FALSE(p.isOk());
    CHECK(firstLine(p.status().message()) == expected);
  };
  check("stages:\n  - [emb, 'h.*']\n  - h.9\n", 2,
        "p.yaml:3:5: error: stage 1 (h.9) holds no node: no module path matches");
  check("stages:\n  - [emb, 'h.*']\n  - [h.3, head]\n", 2,
        "p.yaml:3:5: error: stage 0 (emb|h.*) and stage 1 (h.3|head) both hold node 8 "
        "aten::linear at h.3.fc (model.py:18)");
  check("stages:\n  - h.1\n  - [emb, h.0, h.2, h.3, head]\n", 2,
        "p.yaml:2:5: error: stage 0 holds node 3 aten::linear at h.1.fc (model.py:13), which comes "
        "after node 2 aten::gelu at h.0.act (model.py:12) of the later stage 1; stages must "
        "follow the graph's order");
  check("stages:\n  - [emb, h.0, h.1]\n  - [h.2, h.3, head]\n", 3,
        "p.yaml:2:3: error: 3 devices per model copy do not split over the 2 pipeline stages");
  auto parse = [&](const std::string &text, const std::string &expected) {
    auto f = plan::parsePlanFile(text + "rules: []\n", "p.yaml");
    REQUIRE_FALSE(f.isOk());
    CHECK(firstLine(f.status().message()) == expected);
  };
  parse("stages: [emb]\n", "p.yaml:1:9: error: 'stages' must list two or more pipeline stages, "
                           "each a module path glob or a list of them");
  parse("stages: [emb, {h.0: 3}]\n",
        "p.yaml:1:15: error: a stage is a module path glob or a list of them");
  parse("stages: [emb, h.0, h.1]\nvirtual_stages: 2\nschedule: interleaved\n",
        "p.yaml:2:17: error: virtual_stages 2 does not divide the 3 stages listed");
  parse("stages: [emb, h.0]\nschedule: zigzag\n",
        "p.yaml:2:11: error: unknown schedule 'zigzag'; expected one of: 1f1b, gpipe, interleaved");
  parse("stages: [emb, h.0, h.1, h.2]\nvirtual_stages: 2\nschedule: gpipe\n",
        "p.yaml:3:11: error: virtual_stages 2 needs schedule: interleaved");
  parse("stages: [emb, h.0]\nschedule: interleaved\n",
        "p.yaml:2:11: error: schedule interleaved needs virtual_stages 2 or more (the model chunks "
        "each physical stage holds)");
  parse("schedule: gpipe\n", "p.yaml:1:11: error: 'schedule' needs 'stages' (the pipeline stages)");
  parse("micro_batches: 0\n", "p.yaml:1:16: error: micro_batches must be at least 1; got 0");
}

TEST_CASE("a pipelined plan is written as a plan file with its stages and applied again",
          "[plan][planfile][pipeline]") {
  ir::Graph g = layers();
  auto p = applyStaged(g,
                       "micro_batches: 4\nschedule: interleaved\nvirtual_stages: 2\nstages:\n"
                       "  - [emb, h.0]\n  - h.1\n  - h.2\n  - [h.3, head]\nrules:\n"
                       "  - {module: 'h.*.fc', partition: {ident: n}}\n",
                       4, 8);
  REQUIRE(p.isOk());
  p->set_micro_batches(4);
  auto text = plan::writePlanFile(g, *p, {"test"});
  REQUIRE(text.isOk());
  CHECK(text->find("plan_ngpus: 4\n") != std::string::npos);
  CHECK(text->find("micro_batches: 4\nschedule: interleaved\nvirtual_stages: 2\nstages:\n"
                   "  - [emb, h.0]   # physical stage 0\n  - [h.1]   # physical stage 1\n"
                   "  - [h.2]   # physical stage 0\n  - [h.3, head]   # physical stage 1\n") !=
        std::string::npos);
  CHECK(text->find("{module: 'h.*.fc', op: aten::linear, partition: {ident: n}}") !=
        std::string::npos);
  auto again = applyStaged(g, *text, 4, 8);
  REQUIRE(again.isOk());
  CHECK(plan::planDifference(*p, *again).empty());
  CHECK(again->schedule() == "interleaved");
  CHECK(again->stages_size() == 4);
}
