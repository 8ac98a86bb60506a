// The comm table as the RVD search's cost.
#include "../CatchCompat.h"

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
