#include "../CatchCompat.h"

#include "nnsc/Transform/RvdLayout.h"
#include "nnsc/Transform/RvdPrimitive.h"

using namespace nnsc::transform;

namespace {

RvdLayout layout(const char *text, std::vector<int64_t> shape, std::vector<int> devices = {}) {
  auto made =
      devices.empty() ? RvdLayout::parse(text, shape) : RvdLayout::parse(text, shape, devices);
  INFO(made.status().message());
  REQUIRE(made.isOk());
  return made.take();
}

std::string parseError(const char *text, std::vector<int64_t> shape,
                       std::vector<int> devices = {}) {
  auto made =
      devices.empty() ? RvdLayout::parse(text, shape) : RvdLayout::parse(text, shape, devices);
  REQUIRE_FALSE(made.isOk());
  return made.status().message();
}

} // namespace

TEST_CASE("rvd layout text round-trips and numbers pieces R outermost", "[rvd]") {
  RvdLayout l = layout("R2V2D1,2", {4, 8});
  CHECK(l.str() == "R2V2D1,2");
  CHECK(l.strWithDevices() == "R2V2D1,2 on [0,1,2,3,4,5,6,7]");
  CHECK(l.r() == 2);
  CHECK(l.v() == 2);
  CHECK(l.d() == std::vector<int64_t>{1, 2});
  CHECK(l.pieceShape() == std::vector<int64_t>{4, 4});
  CHECK(l.pieceElements() == 16);
  // (r=1, v=0, d0=0, d1=1) is piece ((1*2 + 0)*1 + 0)*2 + 1 = 5.
  CHECK(l.flatOf({1, 0, 0, 1}) == 5);
  CHECK(l.coordOf(5) == std::vector<int64_t>{1, 0, 0, 1});
  CHECK(layout("R2V1D", {}).str() == "R2V1D");
}

TEST_CASE("rvd make builds the same layout as parse", "[rvd]") {
  auto made = RvdLayout::make({8}, 1, 2, {2}, {3, 1, 2, 0});
  REQUIRE(made.isOk());
  CHECK(*made == layout("R1V2D2", {8}, {3, 1, 2, 0}));
  CHECK(made->deviceSet() == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("invalid rvd layouts are rejected with the bad value named", "[rvd]") {
  CHECK(parseError("R2V1D2", {8}, {0, 1, 2}) == "layout R2V1D2 needs 4 devices, got 3");
  CHECK(parseError("R1V1D1,4", {4, 6}) ==
        "dim 1 of size 6 does not split into 4 chunks (layout R1V1D1,4 of tensor [4, 6])");
  CHECK(parseError("R1V1D2", {4, 8}) ==
        "layout R1V1D2 gives 1 dim counts for a tensor of rank 2 [4, 8]");
  CHECK(parseError("R0V1D1", {4}) == "rvd counts must be positive, got R0V1D1");
  CHECK(parseError("R1V2D2", {4}, {0, 1, 1, 2}) == "device 1 appears twice in [0,1,1,2]");
  CHECK(parseError("R2V1D1", {4}, {0, -1}) == "device id -1 is negative");
  CHECK(parseError("R1X2D1", {4}) ==
        "bad rvd layout 'R1X2D1': expected R<n>V<n>D<n>,<n>,... like R1V2D1,1");
  CHECK(parseError("R1V1D1,", {4, 4}).rfind("bad rvd layout 'R1V1D1,'", 0) == 0);
  CHECK(parseError("R1V1", {}).rfind("bad rvd layout", 0) == 0);
}

TEST_CASE("rvd equivalence ignores replica and partial labels, not chunk positions", "[rvd]") {
  CHECK(layout("R2V1D1", {4}, {0, 1}).equivalent(layout("R2V1D1", {4}, {1, 0})));
  CHECK(layout("R1V2D1", {4}, {0, 1}).equivalent(layout("R1V2D1", {4}, {1, 0})));
  CHECK_FALSE(layout("R1V1D2", {4}, {0, 1}).equivalent(layout("R1V1D2", {4}, {1, 0})));
  // R2V2 on 0..3: partial 0 on {0,2}, partial 1 on {1,3}.
  RvdLayout rv = layout("R2V2D1", {4});
  CHECK(rv.equivalent(layout("R2V2D1", {4}, {3, 0, 1, 2})));
  CHECK_FALSE(rv.equivalent(layout("R2V2D1", {4}, {0, 2, 1, 3})));
  CHECK_FALSE(rv.equivalent(layout("R4V1D1", {4})));
  CHECK(rv.canonical() == rv);
}

TEST_CASE("rvd primitives are chosen by the axes they move", "[rvd]") {
  CHECK(*primitiveFor(axisOfDim(0), kAxisR) == Primitive::AllGather);
  CHECK(*primitiveFor(kAxisV, kAxisR) == Primitive::AllReduce);
  CHECK(*primitiveFor(kAxisV, axisOfDim(1)) == Primitive::ReduceScatter);
  CHECK(*primitiveFor(axisOfDim(0), axisOfDim(1)) == Primitive::AllToAll);
  CHECK(*primitiveFor(kAxisR, axisOfDim(0)) == Primitive::Chunk);
  CHECK(*primitiveFor(kAxisR, kAxisV) == Primitive::ValueSplit);
  auto none = primitiveFor(axisOfDim(0), kAxisV);
  REQUIRE_FALSE(none.isOk());
  CHECK(none.status().message() ==
        "no primitive moves D0 into V; expected one of: D->R, V->R, V->D, D->D, R->D, R->V");
  CHECK_FALSE(primitiveFor(axisOfDim(1), axisOfDim(1)).isOk());
}

TEST_CASE("rvd transitions group devices that differ only in the moved coordinate", "[rvd]") {
  // R2V2D1,2 on 0..7; all_reduce V->R pairs partial 0 and 1 of each piece.
  RvdLayout l = layout("R2V2D1,2", {4, 8});
  auto ar = applyTransition(l, {kAxisV, kAxisR, 2});
  REQUIRE(ar.isOk());
  CHECK(ar->kind == Primitive::AllReduce);
  CHECK(ar->groups == std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(ar->after.str() == "R4V1D1,2");
  // all_gather D1->R on the members holding column chunks 0 and 1.
  auto ag = applyTransition(l, {axisOfDim(1), kAxisR, 2});
  REQUIRE(ag.isOk());
  CHECK(ag->groups == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(ag->fromDim() == 1);
  CHECK(ag->toDim() == -1);
  // chunk R->D0: replica r becomes row chunk r.
  auto ch = applyTransition(l, {kAxisR, axisOfDim(0), 2});
  REQUIRE(ch.isOk());
  CHECK(ch->groups == std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(ch->after.strWithDevices() == "R1V2D2,2 on [0,1,4,5,2,3,6,7]");
}

TEST_CASE("rvd transitions reject moves that do not fit", "[rvd]") {
  RvdLayout l = layout("R1V2D1", {6});
  auto three = applyTransition(l, {kAxisV, kAxisR, 3});
  REQUIRE_FALSE(three.isOk());
  CHECK(three.status().message() == "V count 2 of layout R1V2D1 does not divide into 3 groups");
  auto one = applyTransition(l, {kAxisV, kAxisR, 1});
  REQUIRE_FALSE(one.isOk());
  CHECK(one.status().message() == "transition V->R needs at least 2 chunks, got 1");
  RvdLayout odd = layout("R1V4D1", {6});
  auto rs = applyTransition(odd, {kAxisV, axisOfDim(0), 4});
  REQUIRE_FALSE(rs.isOk());
  CHECK(rs.status().message() ==
        "dim 0 of size 6 does not split into 4 chunks (layout R1V1D4 of tensor [6])");
}

TEST_CASE("rvd undoTransition inverts applyTransition", "[rvd]") {
  RvdLayout l = layout("R2V2D2,1", {4, 4}, {5, 3, 7, 1, 0, 2, 6, 4});
  for (Transition t : {Transition{kAxisV, kAxisR, 2}, Transition{axisOfDim(0), axisOfDim(1), 2},
                       Transition{kAxisR, kAxisV, 2}, Transition{kAxisV, axisOfDim(1), 2}}) {
    auto step = applyTransition(l, t);
    REQUIRE(step.isOk());
    auto back = undoTransition(step->after, t);
    REQUIRE(back.isOk());
    CHECK(*back == l);
  }
}

TEST_CASE("rvd regroupAxis transposes the axis index as nnScaler's inner_transpose", "[rvd]") {
  // R4 of pairs: replicas [0,1] [2,3] [4,5] [6,7] become [0,1] [4,5] [2,3] [6,7].
  RvdLayout l = layout("R4V1D2", {8});
  RvdLayout t = regroupAxis(l, kAxisR, 2);
  CHECK(t.devices() == std::vector<int>{0, 1, 4, 5, 2, 3, 6, 7});
  CHECK(t.equivalent(l));
}

TEST_CASE("interleaved rvd layouts: text, blocked view, equivalence", "[rvd]") {
  RvdLayout l = layout("R1V1D1,2", {4, 48});
  auto blocked = l.withBlocks({1, 3});
  REQUIRE(blocked.isOk());
  CHECK(blocked->str() == "R1V1D1,2{3}");
  CHECK(blocked->interleaved());
  CHECK(blocked->pieceShape() == std::vector<int64_t>{4, 24}); // 8 rows of each of 3 blocks
  CHECK(blocked->expanded().str() == "R1V1D1,1,2");
  CHECK(blocked->expanded().shape() == std::vector<int64_t>{4, 3, 16});
  CHECK_FALSE(blocked->equivalent(l)); // same counts, other elements per device
  // Blocks on a dim that is not cut are no blocks at all.
  auto whole = l.withBlocks({3, 1});
  REQUIRE(whole.isOk());
  CHECK_FALSE(whole->interleaved());
  // Viewing a layout by another's blocks where it does not cut the dim.
  RvdLayout rep = layout("R2V1D1,1", {4, 48});
  auto viewed = rep.expandedBy({1, 3});
  REQUIRE(viewed.isOk());
  CHECK(viewed->str() == "R2V1D1,1,1");
  CHECK_FALSE(blocked->expandedBy({1, 4}).isOk()); // not its own blocks
  CHECK(l.withBlocks({1, 5}).status().message() ==
        "dim 1 of size 48 does not split into 2 chunks of each of 5 blocks");
}
