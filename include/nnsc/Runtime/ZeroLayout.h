#pragma once
/// How ZeRO-1 partitions one gradient bucket over its group (no LibTorch).
///
/// A reducer's bucket is a flat buffer of its members' elements, one after
/// another in bucket order (Reducer.h). Under ZeRO the buffer is padded with
/// zeros to a multiple of the group size G, and rank r of the group owns the
/// contiguous range [r*S, (r+1)*S), S = padded / G: it receives that range of
/// the summed gradient (reduce-scatter), keeps the optimizer states for it
/// (and, under mixed precision, the float32 masters), updates those elements
/// of the parameters and sends them to the others (all-gather). As DeepSpeed
/// stage 1 and Megatron's distributed optimizer, a range may start or end
/// inside a parameter: the owned part of each member is a ZeroPiece.

#include <cstdint>
#include <vector>

namespace nnsc::rt {

/// The part of one bucket member that a rank owns.
struct ZeroPiece {
  size_t member = 0;       ///< index into the bucket's members
  int64_t paramOffset = 0; ///< first owned element, in the member's flattened elements
  int64_t length = 0;      ///< owned elements
  int64_t shardOffset = 0; ///< where they sit in the rank's shard [0, S)
};

struct ZeroBucketLayout {
  int64_t numel = 0;             ///< the members' elements together
  int64_t padded = 0;            ///< numel rounded up to a multiple of the group size
  int64_t shardNumel = 0;        ///< S = padded / group size
  int64_t shardBegin = 0;        ///< the owned range's start in the flat buffer, rank * S
  std::vector<ZeroPiece> pieces; ///< owned parts, in flat order
};

/// Partitions a bucket whose members have `memberNumels` elements (in bucket
/// order) over `groupSize` ranks, for rank `groupRank`. Requires groupSize >= 1
/// and 0 <= groupRank < groupSize.
ZeroBucketLayout partitionBucket(const std::vector<int64_t> &memberNumels, int groupSize,
                                 int groupRank);

} // namespace nnsc::rt
