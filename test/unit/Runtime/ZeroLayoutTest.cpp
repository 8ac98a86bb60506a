// ZeRO-1's partition of a gradient bucket (ZeroLayout.h): padding to a
// multiple of the group, contiguous owned ranges, pieces that cut members.
#include "../CatchCompat.h"

#include "nnsc/Runtime/ZeroLayout.h"

using namespace nnsc::rt;

TEST_CASE("a bucket pads to a multiple of the group and each rank owns one range", "[zero]") {
  // members of 6, 3 and 4 elements: 13 -> 14 padded, S = 7 over 2 ranks
  ZeroBucketLayout r0 = partitionBucket({6, 3, 4}, 2, 0);
  CHECK(r0.numel == 13);
  CHECK(r0.padded == 14);
  CHECK(r0.shardNumel == 7);
  CHECK(r0.shardBegin == 0);
  REQUIRE(r0.pieces.size() == 2); // all of member 0, the first element of member 1
  CHECK(r0.pieces[0].member == 0);
  CHECK(r0.pieces[0].length == 6);
  CHECK(r0.pieces[1].member == 1);
  CHECK(r0.pieces[1].paramOffset == 0);
  CHECK(r0.pieces[1].length == 1);
  CHECK(r0.pieces[1].shardOffset == 6);

  ZeroBucketLayout r1 = partitionBucket({6, 3, 4}, 2, 1);
  CHECK(r1.shardBegin == 7);
  REQUIRE(r1.pieces.size() == 2); // the rest of member 1, all of member 2, one pad element
  CHECK(r1.pieces[0].member == 1);
  CHECK(r1.pieces[0].paramOffset == 1);
  CHECK(r1.pieces[0].length == 2);
  CHECK(r1.pieces[0].shardOffset == 0);
  CHECK(r1.pieces[1].member == 2);
  CHECK(r1.pieces[1].length == 4);
  CHECK(r1.pieces[1].shardOffset == 2);
}

TEST_CASE("the ranks' pieces tile every member exactly once", "[zero]") {
  std::vector<int64_t> numels{5, 1, 17, 2, 9};
  for (int g : {1, 2, 3, 4, 8, 64}) {
    std::vector<std::vector<int>> covered(numels.size());
    for (size_t m = 0; m < numels.size(); ++m)
      covered[m].assign(size_t(numels[m]), 0);
    for (int r = 0; r < g; ++r)
      for (const ZeroPiece &p : partitionBucket(numels, g, r).pieces)
        for (int64_t k = 0; k < p.length; ++k)
          ++covered[p.member][size_t(p.paramOffset + k)];
    for (const auto &m : covered)
      for (int c : m)
        CHECK(c == 1);
  }
}
