// The comm table as the RVD search's cost; step inputs under mixed precision.
#include "../CatchCompat.h"

#include "../Plan/HandGraphs.h"
#include "nnsc/Cost/PrecisionView.h"
#include "nnsc/Plan/Plan.h"
#include "nnsc/Transform/StepCost.h"

using namespace nnsc;

TEST_CASE("tableRvdCost prices RVD steps from the comm table", "[transform][cost]") {
  cost::Cluster cluster;
  cluster.devicesPerNode = 4;
  cost::CommTable table;
  REQUIRE(table
              .add({cost::Collective::AllReduce,
                    4,
                    cost::Placement::Intra,
                    {{1000, 1e-5}, {2000, 2e-5}}})
              .isOk());
  REQUIRE(
      table.add({cost::Collective::AllReduce, 8, cost::Placement::Inter, {{1000, 5e-5}}}).isOk());
  cluster.comm = table;
  transform::RvdCostFn fn = transform::tableRvdCost(cluster);
  CHECK(fn(transform::Primitive::AllReduce, 1500, 4) == Catch::Approx(1.5e-5));
  CHECK(fn(transform::Primitive::AllReduce, 1000, 8) == Catch::Approx(5e-5)); // across nodes
  CHECK(fn(transform::Primitive::Chunk, 1500, 4) == 0);
  // A collective the table lacks falls back to the alpha-beta default.
  CHECK(fn(transform::Primitive::AllGather, 1500, 4) ==
        Catch::Approx(transform::AlphaBetaCost{}(transform::Primitive::AllGather, 1500, 4)));
  CHECK(transform::collectiveOf(transform::Primitive::ReduceScatter) ==
        cost::Collective::ReduceScatter);
  CHECK_FALSE(transform::collectiveOf(transform::Primitive::ValueSplit));
}

TEST_CASE("the runtime's copies around a collective", "[transform][cost]") {
  using transform::Primitive;
  transform::CommOp op;
  op.outShape = {4, 8, 16};
  CHECK(transform::stagingBytes(Primitive::AllReduce, 1000, op) == 2000);
  op.args = {1};
  CHECK(transform::stagingBytes(Primitive::AllGather, 1000, op) == 2000);
  // Chunks along dim 1 of [4, 8, 16] are strided: made contiguous, a copy.
  CHECK(transform::stagingBytes(Primitive::ReduceScatter, 1000, op) == 2000);
  // Along the leading dim (or behind dims of 1) they are slices: no copy.
  op.args = {0};
  CHECK(transform::stagingBytes(Primitive::ReduceScatter, 1000, op) == 0);
  op.outShape = {1, 8, 16};
  op.args = {-2};
  CHECK(transform::stagingBytes(Primitive::ReduceScatter, 1000, op) == 0);
  op.args = {2, 1};
  CHECK(transform::stagingBytes(Primitive::AllToAll, 1000, op) == 4000);
  CHECK(transform::stagingBytes(Primitive::Chunk, 1000, op) == 0);
}

TEST_CASE("mixed precision: 16-bit parts, gradients reduced in float32", "[transform][cost]") {
  ir::Graph g = testgraphs::mlp();
  plan::PlanOptions options;
  options.policy = "dp";
  options.runtimeNgpus = 2;
  auto plan = plan::makePlan(g, options);
  REQUIRE(plan.isOk());
  auto inputsAt = [&](cost::Precision p) {
    ir::Graph view = cost::atPrecision(g, p);
    auto pg = transform::partitionGraph(view, *plan);
    REQUIRE(pg.isOk());
    cost::MemoryOptions memory;
    memory.precision = p;
    return transform::stepInputs(view, *plan, *pg, memory);
  };
  std::vector<cost::StepInput> fp32 = inputsAt(cost::Precision::Float32);
  std::vector<cost::StepInput> bf16 = inputsAt(cost::Precision::BFloat16);
  REQUIRE(fp32.size() == 1);
  REQUIRE(bf16.size() == 1);
  // fc1's output: float32, then bf16 (half the bytes a part moves).
  CHECK(fp32[0].parts[0].outputs[0].dtype == ir::DType::Float32);
  CHECK(bf16[0].parts[0].outputs[0].dtype == ir::DType::BFloat16);
  // The weights' gradients: 4 bytes an element on the wire either way
  // (precision.grad_reduce_dtype's fp32 default), not the bf16 weights' 2.
  REQUIRE(bf16[0].grads.size() == 2);
  REQUIRE(fp32[0].grads.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(bf16[0].grads[i].bytes == fp32[0].grads[i].bytes);
    CHECK(bf16[0].grads[i].bytes == 4 * 32 * 16);
  }
}
