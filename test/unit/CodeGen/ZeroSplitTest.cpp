#include "../CatchCompat.h"

#include "nnsc/CodeGen/RankLayout.h"

using nnsc::codegen::zeroSplitOf;

// ZeRO in blocks of worldSize / ngroups consecutive ranks.
TEST_CASE("zeroSplitOf cuts a data-parallel group by blocks", "[codegen][zero]") {
  // dp 8 in 2 blocks of 4: rank 6 shards with 4..7, sums with rank 2.
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  auto s = zeroSplitOf(all, 8, 2, 6);
  CHECK(s.shard == std::vector<int>{4, 5, 6, 7});
  CHECK(s.cross == std::vector<int>{2, 6});
  // 4 blocks of 2: rank 5 shards with 4, sums over 1, 3, 5, 7.
  s = zeroSplitOf(all, 8, 4, 5);
  CHECK(s.shard == std::vector<int>{4, 5});
  CHECK(s.cross == std::vector<int>{1, 3, 5, 7});
}

TEST_CASE("zeroSplitOf takes a tensor-parallel slice's holders in each block", "[codegen][zero]") {
  // tp 2 x dp 4 (8 ranks) in 2 blocks: plan device 1's holders are 1, 3, 5, 7;
  // block 0 holds 1 and 3, block 1 holds 5 and 7.
  std::vector<int> slice{1, 3, 5, 7};
  auto s = zeroSplitOf(slice, 8, 2, 7);
  CHECK(s.shard == std::vector<int>{5, 7});
  CHECK(s.cross == std::vector<int>{3, 7});
  // With 4 blocks each block holds one: nothing to shard, the sum over all.
  s = zeroSplitOf(slice, 8, 4, 3);
  CHECK(s.shard == std::vector<int>{3});
  CHECK(s.cross == std::vector<int>{1, 3, 5, 7});
}

TEST_CASE("zeroSplitOf refuses uneven blocks and absent ranks", "[codegen][zero]") {
  // Ranks 0, 1, 2 over 2 blocks of 2: block 0 holds two, block 1 one.
  CHECK(zeroSplitOf({0, 1, 2}, 4, 2, 0).shard.empty());
  CHECK(zeroSplitOf({0, 1, 2}, 4, 2, 2).cross.empty());
  // A rank outside the group.
  CHECK(zeroSplitOf({0, 2}, 4, 2, 1).shard.empty());
}
