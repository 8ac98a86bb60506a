// Programs of graphs whose forward updates buffers: the block of in-place
// writes at the end of the forward, whole and partitioned.
#include "../CatchCompat.h"

#include <sstream>

#include "../Plan/HandGraphs.h"
#include "nnsc/CodeGen/Manifest.h"
#include "nnsc/CodeGen/Program.h"
#include "nnsc/CodeGen/RankLayout.h"
#include "nnsc/Plan/NodeSplit.h"
#include "nnsc/Plan/Plan.h"

using namespace nnsc;
using namespace nnsc::codegen;

namespace {

// By node id: an identifier to split along over 2 devices, "" to replicate.
proto::Plan twoDevicePlan(const ir::Graph &g, const std::vector<std::string> &idents,
                          int copies = 1) {
  proto::Plan plan;
  plan.set_format_version(plan::kPlanFormatVersion);
  plan.set_policy("test");
  plan.set_plan_ngpus(2);
  plan.set_runtime_ngpus(2 * copies);
  plan.set_micro_batches(1);
  auto *stage = plan.add_stages();
  stage->add_devices(0);
  stage->add_devices(1);
  for (const ir::Node &node : g.nodes()) {
    const std::string &id = idents.at(static_cast<size_t>(node.id));
    auto np = id.empty()
                  ? Expected<proto::NodePlan>(plan::replicateNode(node, plan::firstDevices(2), ""))
                  : plan::splitNodeByIdent(g, node, id, plan::firstDevices(2), "");
    REQUIRE(np.isOk());
    *plan.add_nodes() = *np;
  }
  REQUIRE(plan::validatePlan(plan, g).isOk());
  return plan;
}

std::string programOf(const ir::Graph &g, const proto::Plan &plan, int rank) {
  auto layout = layoutRank(g, plan, rank);
  INFO(layout.status().message());
  REQUIRE(layout.isOk());
  auto src = emitProgram(g, *layout, {plan.policy(), "graph.pb"});
  INFO(src.status().message());
  REQUIRE(src.isOk());
  return *src;
}

// The program from the blank line before the buffer block to the end.
std::string ending(const std::string &program) {
  size_t at = program.find("\n\n    # buffers the forward updated");
  return at == std::string::npos ? program : program.substr(at);
}

} // namespace

TEST_CASE("program: buffers take their new values in place after the forward, data parallel",
          "[codegen][state]") {
  ir::Graph g = testgraphs::runningStats();
  plan::PlanOptions o;
  o.runtimeNgpus = 2;
  auto plan = plan::makePlan(g, o);
  REQUIRE(plan.isOk());
  std::string src = programOf(g, *plan, 1);
  INFO(src);
  CHECK(src.find("    p1: Tensor,  # stat.mean: float32[16]\n"
                 "    p2: Tensor,  # stat.count: int64[]\n") != std::string::npos);
  CHECK(ending(src) == "\n\n    # buffers the forward updated take their new values in place\n"
                       "    p1.copy_(t7.detach())  # stat.mean <- %7\n"
                       "    p2.copy_(t8.detach())  # stat.count <- %8\n"
                       "\n"
                       "    return (t9, t4)\n");
}

TEST_CASE("program: a buffer piece takes the gathered value of a split update",
          "[codegen][state]") {
  ir::Graph g = testgraphs::runningStats();
  // The buffer is stored whole on both devices (neg replicated); the update
  // is computed split on its dim and gathered before the write.
  std::string src = programOf(g, twoDevicePlan(g, {"", "n", "b", "a", "", ""}), 1);
  INFO(src);
  CHECK(ending(src) ==
        "\n\n    # buffers the forward updated take their new values in place\n"
        "    # adapter 2: %7 float32[16]: R1V1D2 on [0,1] -> R2V1D1 on [0,1]\n"
        "    a2 = nnsc.all_gather_split(t7, dim=0, group=0)  # D0->R x2, backward chunk over "
        "ranks [0, 1]\n"
        "    p1.copy_(a2.detach())  # stat.mean <- %7\n"
        "    p2.copy_(t8.detach())  # stat.count <- %8\n"
        "\n"
        "    return (t9, t4)\n");
}

TEST_CASE("program: each device writes its own slice of a split buffer", "[codegen][state]") {
  ir::Graph g = testgraphs::runningStats();
  std::string src = programOf(g, twoDevicePlan(g, {"a", "n", "b", "a", "", ""}), 1);
  INFO(src);
  CHECK(src.find("    p1: Tensor,  # stat.mean: [8:16] of float32[16]\n") != std::string::npos);
  CHECK(ending(src).find("    p1.copy_(t7.detach())  # stat.mean <- %7\n") != std::string::npos);
}

namespace {

std::vector<std::vector<int>> syncGroups(const JobLayout &job, const RankLayout &layout) {
  std::vector<std::vector<int>> out;
  for (const BufferSyncSpec &b : layout.bufferSyncs)
    out.push_back(job.groups.at(static_cast<size_t>(b.group)).ranks);
  return out;
}

} // namespace

TEST_CASE("manifest: written buffers are kept equal over the copies holding them",
          "[codegen][state]") {
  ir::Graph g = testgraphs::runningStats();
  plan::PlanOptions o;
  o.runtimeNgpus = 2;
  auto layout = layoutRank(g, *plan::makePlan(g, o), 1);
  REQUIRE(layout.isOk());
  REQUIRE(layout->bufferSyncs.size() == 1);
  CHECK(layout->bufferSyncs[0].group == 0);
  CHECK(layout->bufferSyncs[0].shards == std::vector<std::string>{"p1", "p2"});
  std::ostringstream printed;
  printManifest(buildManifest(g, *layout, {}), printed);
  CHECK(printed.str().find("\nbuffers: group 0, shards p1, p2 kept equal\n") != std::string::npos);
  // One copy: nothing to keep equal.
  o.runtimeNgpus = 1;
  auto single = layoutRank(g, *plan::makePlan(g, o), 0);
  REQUIRE(single.isOk());
  CHECK(single->bufferSyncs.empty());
}

TEST_CASE("manifest: a split buffer piece syncs with the same piece in the other copy",
          "[codegen][state]") {
  ir::Graph g = testgraphs::runningStats();
  // stat.mean split over the plan's 2 devices, stat.count whole on both.
  auto job = layoutJob(g, twoDevicePlan(g, {"a", "n", "b", "a", "", ""}, 2));
  REQUIRE(job.isOk());
  auto rank3 = layoutRank(g, *job, 3);
  REQUIRE(rank3.isOk());
  CHECK(syncGroups(*job, *rank3) == std::vector<std::vector<int>>{{1, 3}, {0, 1, 2, 3}});
  CHECK(rank3->bufferSyncs[0].shards == std::vector<std::string>{"p1"});
  CHECK(rank3->bufferSyncs[1].shards == std::vector<std::string>{"p2"});
  // Stored whole on both devices: one group over all four ranks.
  auto whole = layoutJob(g, twoDevicePlan(g, {"", "n", "b", "a", "", ""}, 2));
  REQUIRE(whole.isOk());
  auto rank2 = layoutRank(g, *whole, 2);
  REQUIRE(rank2.isOk());
  REQUIRE(rank2->bufferSyncs.size() == 1);
  CHECK(syncGroups(*whole, *rank2) == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(rank2->bufferSyncs[0].shards == std::vector<std::string>{"p1", "p2"});
}
