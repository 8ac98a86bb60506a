// Rank layouts, programs and manifests of a plan spanning two devices
// (Megatron's MLP: fc1 column-parallel, fc2 row-parallel), run by two
// data-parallel copies.
#include "../CatchCompat.h"

#include "../Plan/HandGraphs.h"
#include "nnsc/CodeGen/Manifest.h"
#include "nnsc/CodeGen/Program.h"
#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"

using namespace nnsc;
using namespace nnsc::codegen;

namespace {

// fc1 on n, gelu on its columns, fc2 on k, the loss replicated; 2 x `copies` ranks.
proto::Plan megatronMlp(const ir::Graph &g, int copies) {
  proto::Plan plan;
  plan.set_format_version(plan::kPlanFormatVersion);
  plan.set_policy("test");
  plan.set_plan_ngpus(2);
  plan.set_runtime_ngpus(2 * copies);
  plan.set_micro_batches(1);
  auto *stage = plan.add_stages();
  stage->add_devices(0);
  stage->add_devices(1);
  const std::vector<std::string> idents = {"n", "b", "k", ""};
  for (const ir::Node &node : g.nodes()) {
    const std::string &id = idents.at(static_cast<size_t>(node.id));
    if (id.empty()) {
      *plan.add_nodes() = plan::replicateNode(node, plan::firstDevices(2), "");
      continue;
    }
    auto np = plan::splitNodeByIdent(g, node, id, plan::firstDevices(2), "");
    REQUIRE(np.isOk());
    *plan.add_nodes() = *np;
  }
  REQUIRE(plan::validatePlan(plan, g).isOk());
  return plan;
}

} // namespace

TEST_CASE("job layout numbers the groups of every copy once", "[codegen][partitioned]") {
  ir::Graph g = testgraphs::mlp();
  auto job = layoutJob(g, megatronMlp(g, 2));
  INFO(job.status().message());
  REQUIRE(job.isOk());
  CHECK(job->planNgpus == 2);
  CHECK(job->dpSize == 2);
  REQUIRE(job->partition.has_value());
  std::vector<std::vector<int>> ranks;
  for (const CommGroupSpec &grp : job->groups)
    ranks.push_back(grp.ranks);
  // The all_reduce after fc2 in copy 0 and copy 1, then each plan device's
  // weight slices across the copies.
  CHECK(ranks == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {0, 2}, {1, 3}});
}

TEST_CASE("rank layout of a tensor-parallel plan: slices, adapters, reducers, loss",
          "[codegen][partitioned]") {
  ir::Graph g = testgraphs::mlp();
  auto layout = layoutRank(g, megatronMlp(g, 2), 3);
  INFO(layout.status().message());
  REQUIRE(layout.isOk());
  CHECK(layout->planDevice == 1);
  CHECK(layout->dpRank == 1);
  REQUIRE(layout->shards.size() == 2);
  CHECK(layout->shards[0].start == std::vector<int64_t>{16, 0}); // fc1 rows
  CHECK(layout->shards[0].stop == std::vector<int64_t>{32, 16});
  CHECK(layout->shards[1].start == std::vector<int64_t>{0, 16}); // fc2 columns
  CHECK(layout->shards[1].replicas == 1);
  REQUIRE(layout->steps.size() == 5);
  const RankStep &adapter = layout->steps[3];
  CHECK(adapter.kind == RankStep::Adapter);
  REQUIRE(adapter.calls.size() == 1);
  CHECK(adapter.calls[0].op == "all_reduce");
  CHECK(adapter.calls[0].group == 1);
  CHECK(adapter.calls[0].ranks == std::vector<int>{2, 3});
  CHECK(layout->steps[4].inputAdapters == std::vector<int>{0});
  CHECK(layout->lossReplicas == 2);
  CHECK(layout->lossScale == 1.0);
  REQUIRE(layout->reducers.size() == 1);
  CHECK(layout->reducers[0].group == 3); // ranks 1 and 3: plan device 1 in both copies
  CHECK(layout->reducers[0].average);
  CHECK(layout->reducers[0].shards == std::vector<std::string>{"p0", "p1"});
  std::vector<int> groupIds;
  for (const CommGroupSpec &grp : layout->groups)
    groupIds.push_back(grp.id);
  CHECK(groupIds == std::vector<int>{1, 3});
}

TEST_CASE("program and manifest of a tensor-parallel rank", "[codegen][partitioned]") {
  ir::Graph g = testgraphs::mlp();
  auto layout = layoutRank(g, megatronMlp(g, 2), 2);
  REQUIRE(layout.isOk());
  auto src = emitProgram(g, *layout, {"test", "g.pb"});
  INFO(src.status().message());
  REQUIRE(src.isOk());
  INFO(*src);
  CHECK(src->find("# nnsc program: rank 2 of 4 (data-parallel copy 1 of 2, plan device 0 of 2)") !=
        std::string::npos);
  CHECK(src->find("    p0: Tensor,  # fc1.weight: [0:16, 0:16] of float32[32, 16]\n") !=
        std::string::npos);
  CHECK(src->find("    # adapter 0: %5 float32[8, 16]: R1V2D1,1 on [0,1] -> R2V1D1,1 on [0,1]\n"
                  "    a0 = nnsc.all_reduce(t5, group=1)  # V->R x2 over ranks [2, 3]\n") !=
        std::string::npos);
  CHECK(src->find("    t6 = torch.sum(a0)\n") != std::string::npos);
  proto::RankManifest m = buildManifest(g, *layout, {});
  CHECK(m.loss_replicas() == 2);
  REQUIRE(m.groups_size() == 2);
  CHECK(m.groups(0).id() == 1);
  CHECK(m.groups(1).id() == 2);
  REQUIRE(m.reducers_size() == 1);
  CHECK(m.reducers(0).group() == 2);
  CHECK(m.shards(0).reducer() == 0);
  CHECK(m.shards(0).slice().stop(0) == 16);
}

TEST_CASE("a loss split by value is a partial share on each rank", "[codegen][partitioned]") {
  ir::Graph g = testgraphs::mlp();
  proto::Plan plan = megatronMlp(g, 1);
  // The loss `a+ b+ -> 1` split along a: each device sums its rows.
  auto np = plan::splitNodeByIdent(g, g.nodes()[3], "a", plan::firstDevices(2), "");
  REQUIRE(np.isOk());
  *plan.mutable_nodes(3) = *np;
  REQUIRE(plan::validatePlan(plan, g).isOk());
  auto layout = layoutRank(g, plan, 1);
  INFO(layout.status().message());
  REQUIRE(layout.isOk());
  CHECK(layout->lossReplicas == 1);
  CHECK(layout->lossScale == 1.0);
  proto::RankManifest m = buildManifest(g, *layout, {});
  CHECK(m.loss_replicas() == 1);
}
