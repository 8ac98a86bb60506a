// Moves real numbers through every step of searched plans, collective by
// collective in member order, and checks that each device ends holding the
// consumer's piece: the groups, member orders and semantics of
// RvdPrimitive.h, checked on every pair of layouts of small device groups.
#include "../CatchCompat.h"

#include <map>
#include <numeric>

#include "nnsc/Transform/RvdSearch.h"

using namespace nnsc::transform;

namespace {

int64_t product(const std::vector<int64_t> &xs, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i)
    p *= xs[i];
  return p;
}

// A region of the full tensor and its values, row-major.
struct Block {
  std::vector<int64_t> start, shape;
  std::vector<double> values;
};

std::vector<Block> splitBlock(const Block &b, int dim, int64_t parts) {
  int64_t outer = product(b.shape, 0, dim), size = b.shape[dim];
  int64_t inner = product(b.shape, dim + 1, b.shape.size()), len = size / parts;
  std::vector<Block> out;
  for (int64_t p = 0; p < parts; ++p) {
    Block part{b.start, b.shape, {}};
    part.shape[dim] = len;
    part.start[dim] += p * len;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = p * len; i < (p + 1) * len; ++i)
        for (int64_t j = 0; j < inner; ++j)
          part.values.push_back(b.values[(o * size + i) * inner + j]);
    out.push_back(part);
  }
  return out;
}

Block concatBlocks(const std::vector<Block> &parts, int dim) {
  Block out{parts[0].start, parts[0].shape, {}};
  for (size_t m = 1; m < parts.size(); ++m) {
    REQUIRE(parts[m].start[dim] == parts[m - 1].start[dim] + parts[m - 1].shape[dim]);
    out.shape[dim] += parts[m].shape[dim];
  }
  int64_t outer = product(out.shape, 0, dim);
  int64_t inner = product(out.shape, dim + 1, out.shape.size());
  for (int64_t o = 0; o < outer; ++o)
    for (const Block &part : parts) {
      int64_t run = part.shape[dim] * inner;
      auto first = part.values.begin() + o * run;
      out.values.insert(out.values.end(), first, first + run);
    }
  return out;
}

Block sumBlocks(const std::vector<Block> &parts) {
  Block out = parts[0];
  for (size_t m = 1; m < parts.size(); ++m) {
    REQUIRE(parts[m].start == out.start);
    REQUIRE(parts[m].shape == out.shape);
    for (size_t i = 0; i < out.values.size(); ++i)
      out.values[i] += parts[m].values[i];
  }
  return out;
}

// What each member holds after `step`, given what each held before.
std::vector<Block> runGroup(const RvdStep &step, const std::vector<Block> &in) {
  size_t n = in.size();
  std::vector<Block> out(n);
  switch (step.kind) {
  case Primitive::AllGather:
    return std::vector<Block>(n, concatBlocks(in, step.fromDim()));
  case Primitive::AllReduce:
    return std::vector<Block>(n, sumBlocks(in));
  case Primitive::ReduceScatter:
    return splitBlock(sumBlocks(in), step.toDim(), n);
  case Primitive::AllToAll:
    for (size_t p = 0; p < n; ++p) {
      std::vector<Block> received;
      for (size_t m = 0; m < n; ++m)
        received.push_back(splitBlock(in[m], step.toDim(), n)[p]);
      out[p] = concatBlocks(received, step.fromDim());
    }
    return out;
  case Primitive::Chunk:
    for (size_t m = 0; m < n; ++m)
      out[m] = splitBlock(in[m], step.toDim(), n)[m];
    return out;
  case Primitive::ValueSplit:
    for (size_t m = 0; m < n; ++m) {
      out[m] = in[m];
      if (m > 0)
        std::fill(out[m].values.begin(), out[m].values.end(), 0.0);
    }
    return out;
  case Primitive::Identity:
    return in;
  }
  return out;
}

Block fullTensor(const std::vector<int64_t> &shape) {
  Block full{std::vector<int64_t>(shape.size(), 0), shape, {}};
  for (int64_t i = 0; i < product(shape, 0, shape.size()); ++i)
    full.values.push_back(static_cast<double>((i * 37 + 11) % 101) - 50);
  return full;
}

// The chunk of `full` at D coordinate `coord` (axes as RvdLayout).
Block chunkAt(Block full, const RvdLayout &layout, const std::vector<int64_t> &coord) {
  for (int dim = 0; dim < layout.rank(); ++dim)
    full = splitBlock(full, dim, layout.axisSize(axisOfDim(dim)))[coord[axisOfDim(dim)]];
  return full;
}

// The producer's pieces: partial v < V-1 of a chunk holds small integers,
// the last partial the rest, so the partials sum exactly to the chunk.
std::map<int, Block> producerPieces(const RvdLayout &layout, const Block &full) {
  std::map<int, Block> pieces;
  int64_t numPieces = layout.numDevices() / (layout.r() * layout.v());
  for (int64_t flat = 0; flat < layout.numDevices(); ++flat) {
    std::vector<int64_t> coord = layout.coordOf(flat);
    Block piece = chunkAt(full, layout, coord);
    for (size_t i = 0; i < piece.values.size(); ++i) {
      double rest = piece.values[i];
      for (int64_t v = 0; v < layout.v(); ++v) {
        int64_t seed = static_cast<int64_t>(i) * 7 + v * 13 + (flat % numPieces) * 5;
        double part = static_cast<double>(seed % 17) - 8;
        if (v == layout.v() - 1)
          part = rest;
        rest -= part;
        if (v == coord[kAxisV]) {
          piece.values[i] = part;
          break;
        }
      }
    }
    pieces[layout.devices()[flat]] = piece;
  }
  return pieces;
}

// Replicas of a partial hold equal values; one of each partial sums to the chunk.
void checkConsumer(const RvdLayout &layout, const std::map<int, Block> &held, const Block &full) {
  int64_t pieces = layout.numDevices() / (layout.r() * layout.v());
  for (int64_t p = 0; p < pieces; ++p) {
    std::vector<Block> partials;
    for (int64_t v = 0; v < layout.v(); ++v)
      for (int64_t r = 0; r < layout.r(); ++r) {
        const Block &b = held.at(layout.devices()[(r * layout.v() + v) * pieces + p]);
        if (r == 0)
          partials.push_back(b);
        CHECK(b.values == partials.back().values);
      }
    Block expected = chunkAt(full, layout, layout.coordOf(p));
    Block sum = sumBlocks(partials);
    CHECK(sum.start == expected.start);
    CHECK(sum.values == expected.values);
  }
}

void simulate(const RvdLayout &from, const RvdLayout &to) {
  auto plan = searchRvdPlan(from, to);
  INFO(from.strWithDevices() << " -> " << to.strWithDevices());
  INFO(plan.status().message());
  REQUIRE(plan.isOk());
  INFO(formatRvdPlan(*plan));
  Block full = fullTensor(from.shape());
  std::map<int, Block> held = producerPieces(from, full);
  for (const RvdStep &step : plan->steps)
    for (const std::vector<int> &group : step.groups) {
      std::vector<Block> in;
      for (int dev : group)
        in.push_back(held.at(dev));
      std::vector<Block> out = runGroup(step, in);
      for (size_t m = 0; m < group.size(); ++m)
        held[group[m]] = out[m];
    }
  checkConsumer(to, held, full);
}

// Every R*V*prod(D) == n whose D counts divide `shape`.
std::vector<std::vector<int64_t>> allCounts(int64_t n, const std::vector<int64_t> &shape) {
  std::vector<std::vector<int64_t>> out{{}};
  for (size_t axis = 0; axis < shape.size() + 2; ++axis) {
    std::vector<std::vector<int64_t>> next;
    for (const auto &prefix : out)
      for (int64_t c = 1; c <= n; ++c) {
        int64_t used = product(prefix, 0, prefix.size()) * c;
        bool last = axis + 1 == shape.size() + 2;
        if (n % used != 0 || (last && used != n) || (axis >= 2 && shape[axis - 2] % c != 0))
          continue;
        next.push_back(prefix);
        next.back().push_back(c);
      }
    out = next;
  }
  return out;
}

void simulateAllPairs(int n, const std::vector<int64_t> &shape, const std::vector<int> &order) {
  std::vector<int> grid(n);
  std::iota(grid.begin(), grid.end(), 0);
  for (const auto &a : allCounts(n, shape))
    for (const auto &b : allCounts(n, shape))
      simulate(*RvdLayout::fromCounts(shape, a, grid), *RvdLayout::fromCounts(shape, b, order));
}

} // namespace

TEST_CASE("rvd plans move the data right: every pair of layouts on 4 devices", "[rvd]") {
  simulateAllPairs(4, {4, 4}, {0, 1, 2, 3});
  simulateAllPairs(4, {4, 4}, {3, 2, 1, 0});
  simulateAllPairs(4, {8}, {1, 3, 0, 2});
}

TEST_CASE("rvd plans move the data right: every pair of layouts on 8 devices", "[rvd]") {
  simulateAllPairs(8, {8, 8}, {0, 1, 2, 3, 4, 5, 6, 7});
  simulateAllPairs(8, {8, 4}, {5, 2, 7, 0, 3, 6, 1, 4});
}

TEST_CASE("rvd plans move the data right: 3-d tensors on 12 devices", "[rvd]") {
  RvdLayout from = *RvdLayout::parse("R1V3D2,2,1", {4, 6, 6});
  simulate(from, *RvdLayout::parse("R2V1D1,3,2", {4, 6, 6}));
  simulate(from, *RvdLayout::parse("R1V1D4,1,3", {4, 6, 6}));
  simulate(*RvdLayout::parse("R3V2D1,2,1", {4, 6, 6}),
           *RvdLayout::parse("R1V1D2,3,2", {4, 6, 6}, {11, 0, 10, 1, 9, 2, 8, 3, 7, 4, 6, 5}));
}
