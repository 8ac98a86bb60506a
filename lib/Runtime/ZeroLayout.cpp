#include "nnsc/Runtime/ZeroLayout.h"

#include <algorithm>

namespace nnsc::rt {

ZeroBucketLayout partitionBucket(const std::vector<int64_t> &memberNumels, int groupSize,
                                 int groupRank) {
  ZeroBucketLayout l;
  for (int64_t n : memberNumels)
    l.numel += n;
  l.padded = (l.numel + groupSize - 1) / groupSize * groupSize;
  l.shardNumel = l.padded / groupSize;
  l.shardBegin = int64_t(groupRank) * l.shardNumel;
  const int64_t end = l.shardBegin + l.shardNumel;
  int64_t at = 0; // the member's first element in the flat buffer
  for (size_t m = 0; m < memberNumels.size(); ++m) {
    int64_t lo = std::max(at, l.shardBegin), hi = std::min(at + memberNumels[m], end);
    if (lo < hi)
      l.pieces.push_back({m, lo - at, hi - lo, lo - l.shardBegin});
    at += memberNumels[m];
  }
  return l;
}

} // namespace nnsc::rt
