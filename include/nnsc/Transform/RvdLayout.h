#pragma once
/// RVD layouts: how one tensor is spread over an ordered group of devices.
///
/// A layout R<r>V<v>D<d0>,<d1>,... cuts the full tensor into d_k equal
/// contiguous chunks along each dim k, holds each chunk as v partial sums
/// (value chunks: same shape, their elementwise sum is the chunk) and keeps
/// each partial on r devices (replicas): r * v * prod(d) pieces, one a device.
///
/// Device order (as nnScaler's RVDLayout.grid): a piece's coordinate
/// (r, v, d0, ..., dn-1) is numbered row-major with R outermost, then V, then
/// the D dims in order, the last D innermost; devices()[i] holds piece i.
/// With the devices 0..7 in order, R2V2D1,2 puts replica 0 on 0-3 and
/// replica 1 on 4-7, partial 0 of replica 0 on 0-1, chunk 1 of dim 1 on the
/// odd devices.
///
/// Interleaved dims: a dim with D count d > 1 may be cut interleaved over b
/// blocks (blocks()[k] = b): viewed as [b, size / b], the inner part is cut
/// into d chunks and piece j holds chunk j of every block. The text form
/// writes it after the count, R1V1D1,2{3}; the collectives that move such a
/// layout work on that view (expanded()). b is 1 wherever d is 1.
///
/// R and V indices are labels: the replicas of a piece are interchangeable,
/// and so are the names of the partials of one chunk (equivalent() compares
/// layouts up to those relabelings; D indices are positions and are kept).
///
/// This header takes plain numbers only: no IR, so the search over layouts
/// (RvdSearch.h) is testable with hand-written layouts.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nnsc/Support/Status.h"

namespace nnsc::transform {

/// Axis numbers of a layout: R, V, then the D count of tensor dim k.
constexpr int kAxisR = 0;
constexpr int kAxisV = 1;
constexpr int axisOfDim(int dim) { return 2 + dim; }
/// The tensor dim of a D axis, or -1 for R and V.
constexpr int dimOfAxis(int axis) { return axis >= 2 ? axis - 2 : -1; }
/// "R", "V" or "D<k>".
std::string axisName(int axis);

class RvdLayout {
public:
  /// An empty layout (no devices); only for default-constructed holders.
  RvdLayout() = default;

  /// Checks and builds the layout of a tensor of `shape` over `devices`:
  /// counts positive, one D count per tensor dim dividing that dim,
  /// r * v * prod(d) == devices.size(), device ids non-negative and distinct.
  /// Errors name the bad value and the layout.
  static Expected<RvdLayout> make(std::vector<int64_t> shape, int64_t r, int64_t v,
                                  std::vector<int64_t> d, std::vector<int> devices);
  /// As make, with counts given per axis (R, V, D0, ...).
  static Expected<RvdLayout> fromCounts(std::vector<int64_t> shape, std::vector<int64_t> counts,
                                        std::vector<int> devices);
  /// Parses the text form "R1V2D1,2" (str()); a scalar has "R2V1D".
  static Expected<RvdLayout> parse(std::string_view text, std::vector<int64_t> shape,
                                   std::vector<int> devices);
  /// As parse, on devices 0..n-1 in order.
  static Expected<RvdLayout> parse(std::string_view text, std::vector<int64_t> shape);

  /// This layout with dim k cut interleaved over blocks[k] (one entry per
  /// dim; entries where d is 1 are stored as 1). Errors: a block count below
  /// 1, or a dim whose size is not divisible by blocks * d.
  Expected<RvdLayout> withBlocks(std::vector<int64_t> blocks) const;
  /// Block counts per dim (all 1: contiguous chunks).
  const std::vector<int64_t> &blocks() const { return blocks_; }
  bool interleaved() const;
  /// The same placement over the view in which every interleaved dim k is
  /// two dims [blocks[k], shape[k] / blocks[k]] (D 1 and d), with no
  /// interleaving left; the device order is unchanged.
  RvdLayout expanded() const;
  /// As expanded(), viewing dim k as [by[k], shape[k] / by[k]] for every
  /// by[k] > 1, also where this layout's D count is 1 (so two layouts of one
  /// tensor can be viewed alike). Errors: by[k] differs from blocks()[k] on an
  /// interleaved dim, or does not divide the dim's chunks.
  Expected<RvdLayout> expandedBy(const std::vector<int64_t> &by) const;

  int64_t r() const { return counts_[kAxisR]; }
  int64_t v() const { return counts_[kAxisV]; }
  /// The D counts, one per tensor dim.
  std::vector<int64_t> d() const { return {counts_.begin() + 2, counts_.end()}; }
  /// Counts per axis: R, V, D0, D1, ...
  const std::vector<int64_t> &counts() const { return counts_; }
  int64_t axisSize(int axis) const { return counts_[axis]; }
  int numAxes() const { return static_cast<int>(counts_.size()); }
  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<int64_t> &shape() const { return shape_; }
  /// devices()[i] holds the piece at flat coordinate i (see the file comment).
  const std::vector<int> &devices() const { return devices_; }
  int numDevices() const { return static_cast<int>(devices_.size()); }
  /// The devices, sorted.
  std::vector<int> deviceSet() const;

  /// The shape of one piece: shape[k] / d[k].
  std::vector<int64_t> pieceShape() const;
  int64_t pieceElements() const;

  /// Flat index <-> coordinate (one entry per axis). Preconditions: in range.
  std::vector<int64_t> coordOf(int64_t flat) const;
  int64_t flatOf(const std::vector<int64_t> &coord) const;

  /// "R1V2D1,1".
  std::string str() const;
  /// "R1V2D1,1 on [0,1]".
  std::string strWithDevices() const;

  /// The same placement with R and V labels in a fixed order: within each
  /// D piece, partial classes sorted by their smallest device, replicas
  /// sorted. Equivalent layouts have identical canonical forms.
  RvdLayout canonical() const;
  /// True when both put the same data on the same devices (same shape and
  /// counts; per D piece, the same partition of devices into partial classes).
  bool equivalent(const RvdLayout &other) const;

  bool operator==(const RvdLayout &o) const {
    return shape_ == o.shape_ && counts_ == o.counts_ && devices_ == o.devices_ &&
           blocks_ == o.blocks_;
  }
  bool operator!=(const RvdLayout &o) const { return !(*this == o); }

private:
  RvdLayout(std::vector<int64_t> shape, std::vector<int64_t> counts, std::vector<int> devices)
      : shape_(std::move(shape)), counts_(std::move(counts)), devices_(std::move(devices)),
        blocks_(shape_.size(), 1) {}

  std::vector<int64_t> shape_;
  std::vector<int64_t> counts_{1, 1};
  std::vector<int> devices_;
  std::vector<int64_t> blocks_;
};

/// "R1V2D1,1" for counts per axis (R, V, D0, ...); "R1V1D1,2{3}" when
/// `blocks` (one per dim, or empty) has a count above 1.
std::string countsStr(const std::vector<int64_t> &counts, const std::vector<int64_t> &blocks = {});

} // namespace nnsc::transform
