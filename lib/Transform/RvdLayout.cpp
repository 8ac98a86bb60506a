// RvdLayout: validation, coordinates, text form and canonical form.
#include "nnsc/Transform/RvdLayout.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::transform {

namespace {

int64_t product(const std::vector<int64_t> &xs, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < xs.size(); ++i)
    p *= xs[i];
  return p;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The layout text only on the error paths: autodist checks millions of layouts.
Status checkCounts(const std::vector<int64_t> &shape, const std::vector<int64_t> &counts) {
  for (int64_t c : counts)
    if (c <= 0)
      return errorf("rvd counts must be positive, got {}", countsStr(counts));
  if (counts.size() != shape.size() + 2)
    return errorf("layout {} gives {} dim counts for a tensor of rank {} {}", countsStr(counts),
                  counts.size() - 2, shape.size(), shapeStr(shape));
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] < 0)
      return errorf("tensor shape {} has a negative dim", shapeStr(shape));
    if (shape[k] % counts[k + 2] != 0)
      return errorf("dim {} of size {} does not split into {} chunks (layout {} of tensor {})", k,
                    shape[k], counts[k + 2], countsStr(counts), shapeStr(shape));
  }
  return Status::ok();
}

Status checkDevices(const std::vector<int64_t> &counts, const std::vector<int> &devices) {
  int64_t need = product(counts);
  if (need != static_cast<int64_t>(devices.size()))
    return errorf("layout {} needs {} devices, got {}", countsStr(counts), need, devices.size());
  std::vector<int> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && sorted.front() < 0)
    return errorf("device id {} is negative", sorted.front());
  auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end())
    return errorf("device {} appears twice in [{}]", *twice, fmt::join(devices, ","));
  return Status::ok();
}

// Reads one decimal count at text[pos]; advances pos.
bool readCount(std::string_view text, size_t &pos, int64_t &out) {
  size_t start = pos;
  out = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) &&
         pos - start < 12)
    out = out * 10 + (text[pos++] - '0');
  return pos > start;
}

Expected<std::vector<int64_t>> parseCounts(std::string_view text) {
  auto bad = [&] {
    return errorf("bad rvd layout '{}': expected R<n>V<n>D<n>,<n>,... like R1V2D1,1", text);
  };
  std::vector<int64_t> counts(2);
  size_t pos = 0;
  if (pos >= text.size() || text[pos++] != 'R' || !readCount(text, pos, counts[0]))
    return bad();
  if (pos >= text.size() || text[pos++] != 'V' || !readCount(text, pos, counts[1]))
    return bad();
  if (pos >= text.size() || text[pos++] != 'D')
    return bad();
  while (pos < text.size()) {
    int64_t c = 0;
    if (!readCount(text, pos, c))
      return bad();
    counts.push_back(c);
    if (pos < text.size() && text[pos++] != ',')
      return bad();
    if (pos == text.size() && text.back() == ',')
      return bad();
  }
  return counts;
}

} // namespace

std::string axisName(int axis) {
  if (axis == kAxisR)
    return "R";
  if (axis == kAxisV)
    return "V";
  return fmt::format("D{}", dimOfAxis(axis));
}

std::string countsStr(const std::vector<int64_t> &counts, const std::vector<int64_t> &blocks) {
  if (counts.size() < 2)
    return "R?V?D";
  std::vector<std::string> d;
  for (size_t k = 2; k < counts.size(); ++k) {
    int64_t b = k - 2 < blocks.size() ? blocks[k - 2] : 1;
    d.push_back(b > 1 ? fmt::format("{}{{{}}}", counts[k], b) : std::to_string(counts[k]));
  }
  return fmt::format("R{}V{}D{}", counts[0], counts[1], fmt::join(d, ","));
}

Expected<RvdLayout> RvdLayout::withBlocks(std::vector<int64_t> blocks) const {
  if (blocks.size() != shape_.size())
    return errorf("{} block counts for a tensor of rank {}", blocks.size(), shape_.size());
  for (size_t k = 0; k < blocks.size(); ++k) {
    int64_t d = counts_[k + 2];
    if (blocks[k] < 1)
      return errorf("block count {} of dim {} must be positive", blocks[k], k);
    if (d == 1)
      blocks[k] = 1;
    if (shape_[k] % (blocks[k] * d) != 0)
      return errorf("dim {} of size {} does not split into {} chunks of each of {} blocks", k,
                    shape_[k], d, blocks[k]);
  }
  RvdLayout out = *this;
  out.blocks_ = std::move(blocks);
  return out;
}

bool RvdLayout::interleaved() const {
  return std::any_of(blocks_.begin(), blocks_.end(), [](int64_t b) { return b > 1; });
}

RvdLayout RvdLayout::expanded() const { return *expandedBy(blocks_); }

Expected<RvdLayout> RvdLayout::expandedBy(const std::vector<int64_t> &by) const {
  if (by.size() != shape_.size())
    return errorf("{} block counts for a tensor of rank {}", by.size(), shape_.size());
  std::vector<int64_t> shape, counts{counts_[0], counts_[1]};
  for (size_t k = 0; k < shape_.size(); ++k) {
    int64_t d = counts_[k + 2];
    if (by[k] < 1 || (blocks_[k] > 1 && by[k] != blocks_[k]) || shape_[k] % (by[k] * d) != 0)
      return errorf("cannot view dim {} of {} ({}) as {} blocks", k, shapeStr(shape_), str(),
                    by[k]);
    if (by[k] > 1) {
      shape.push_back(by[k]);
      counts.push_back(1);
    }
    shape.push_back(shape_[k] / by[k]);
    counts.push_back(d);
  }
  return RvdLayout(std::move(shape), std::move(counts), devices_);
}

Expected<RvdLayout> RvdLayout::fromCounts(std::vector<int64_t> shape, std::vector<int64_t> counts,
                                          std::vector<int> devices) {
  NNSC_RETURN_IF_ERROR(checkCounts(shape, counts));
  NNSC_RETURN_IF_ERROR(checkDevices(counts, devices));
  return RvdLayout(std::move(shape), std::move(counts), std::move(devices));
}

Expected<RvdLayout> RvdLayout::make(std::vector<int64_t> shape, int64_t r, int64_t v,
                                    std::vector<int64_t> d, std::vector<int> devices) {
  std::vector<int64_t> counts{r, v};
  counts.insert(counts.end(), d.begin(), d.end());
  return fromCounts(std::move(shape), std::move(counts), std::move(devices));
}

Expected<RvdLayout> RvdLayout::parse(std::string_view text, std::vector<int64_t> shape,
                                     std::vector<int> devices) {
  auto counts = parseCounts(text);
  if (!counts)
    return counts.status();
  return fromCounts(std::move(shape), counts.take(), std::move(devices));
}

Expected<RvdLayout> RvdLayout::parse(std::string_view text, std::vector<int64_t> shape) {
  auto counts = parseCounts(text);
  if (!counts)
    return counts.status();
  std::vector<int> devices(static_cast<size_t>(std::max<int64_t>(0, product(*counts))));
  std::iota(devices.begin(), devices.end(), 0);
  return fromCounts(std::move(shape), counts.take(), std::move(devices));
}

std::vector<int> RvdLayout::deviceSet() const {
  std::vector<int> sorted = devices_;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

std::vector<int64_t> RvdLayout::pieceShape() const {
  std::vector<int64_t> piece = shape_;
  for (size_t k = 0; k < piece.size(); ++k)
    piece[k] /= counts_[k + 2];
  return piece;
}

int64_t RvdLayout::pieceElements() const { return product(pieceShape()); }

std::vector<int64_t> RvdLayout::coordOf(int64_t flat) const {
  std::vector<int64_t> coord(counts_.size());
  for (size_t i = counts_.size(); i-- > 0;) {
    coord[i] = flat % counts_[i];
    flat /= counts_[i];
  }
  return coord;
}

int64_t RvdLayout::flatOf(const std::vector<int64_t> &coord) const {
  int64_t flat = 0;
  for (size_t i = 0; i < counts_.size(); ++i)
    flat = flat * counts_[i] + coord[i];
  return flat;
}

std::string RvdLayout::str() const { return countsStr(counts_, blocks_); }

std::string RvdLayout::strWithDevices() const {
  return fmt::format("{} on [{}]", str(), fmt::join(devices_, ","));
}

RvdLayout RvdLayout::canonical() const {
  // Flat index = (r * V + v) * P + p, where p numbers the D pieces.
  int64_t nr = r(), nv = v(), np = product(counts_, 2);
  RvdLayout out = *this;
  for (int64_t p = 0; p < np; ++p) {
    std::vector<std::vector<int>> classes(nv);
    for (int64_t iv = 0; iv < nv; ++iv) {
      for (int64_t ir = 0; ir < nr; ++ir)
        classes[iv].push_back(devices_[(ir * nv + iv) * np + p]);
      std::sort(classes[iv].begin(), classes[iv].end());
    }
    std::sort(classes.begin(), classes.end());
    for (int64_t iv = 0; iv < nv; ++iv)
      for (int64_t ir = 0; ir < nr; ++ir)
        out.devices_[(ir * nv + iv) * np + p] = classes[iv][ir];
  }
  return out;
}

bool RvdLayout::equivalent(const RvdLayout &other) const {
  return shape_ == other.shape_ && counts_ == other.counts_ && blocks_ == other.blocks_ &&
         canonical() == other.canonical();
}

} // namespace nnsc::transform
