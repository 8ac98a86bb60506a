// Fuzzes what the planner does with an annotation (ops::bindFirstMatch,
// splittableIdents, splitEffect, identAt): the input is the annotation text,
// a NUL, then bytes that choose the tensors' shapes and the splits.
#include <fuzzer/FuzzedDataProvider.h>

#include "FuzzCommon.h"
#include "nnsc/Ops/AnnotationSplit.h"

using namespace nnsc;

namespace {

// Sizes a shape may have: the ordinary ones, and the limits of int64.
int64_t pickSize(FuzzedDataProvider &in) {
  static const int64_t kSizes[] = {0,        1, 2, 3, 4, 6, 8, 12, 64, 1 << 30, int64_t(1) << 62,
                                   INT64_MAX};
  return kSizes[in.ConsumeIntegralInRange<size_t>(0, std::size(kSizes) - 1)];
}

// One shape per annotated tensor: its named dims, '*' standing for 0..2 dims.
std::vector<ir::Shape> pickShapes(const std::vector<ops::ShapeAnno> &shapes, int ellipsis,
                                  FuzzedDataProvider &in) {
  std::vector<ir::Shape> out;
  for (const ops::ShapeAnno &s : shapes) {
    ir::Shape shape;
    for (const ops::DimAnno &d : s.dims)
      for (int k = 0, n = d.ellipsis ? ellipsis : 1; k < n; ++k)
        shape.push_back(pickSize(in));
    if (in.ConsumeBool() && in.ConsumeBool()) // now and then a rank that does not fit
      shape.push_back(pickSize(in));
    out.push_back(shape);
  }
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string all = fuzz::bytesOf(data, size);
  size_t nul = all.find('\0');
  auto candidates = ops::parseCandidates(all.substr(0, nul));
  if (!candidates || candidates->empty())
    return 0;
  std::string rest = nul == std::string::npos ? "" : all.substr(nul + 1);
  FuzzedDataProvider in(reinterpret_cast<const uint8_t *>(rest.data()), rest.size());
  const ops::OpAnno &first = candidates->front();
  int ellipsis = in.ConsumeIntegralInRange<int>(0, 2);
  auto inputs = pickShapes(first.inputs, ellipsis, in);
  auto outputs =
      in.ConsumeBool() ? pickShapes(first.outputs, ellipsis, in) : std::vector<ir::Shape>{};
  auto bound = ops::bindFirstMatch(*candidates, inputs, outputs);
  if (!bound) {
    fuzz::checkMessage(bound.status());
    return 0;
  }
  std::vector<std::string> ids = ops::splittableIdents(*bound);
  for (const auto &[id, sz] : bound->sizes)
    ids.push_back(id); // every identifier, numerals and frozen ones included
  static const int kParts[] = {1, 2, 3, 4, 8, 1 << 20, INT32_MAX};
  static const int64_t kInterleave[] = {1, 2, 3, int64_t(1) << 40, INT64_MAX};
  for (const std::string &id : ids) {
    int n = kParts[in.ConsumeIntegralInRange<size_t>(0, std::size(kParts) - 1)];
    int64_t g = kInterleave[in.ConsumeIntegralInRange<size_t>(0, std::size(kInterleave) - 1)];
    auto effect = ops::splitEffect(*bound, id, n, g);
    if (!effect)
      fuzz::checkMessage(effect.status());
  }
  for (int i = -1; i <= static_cast<int>(first.inputs.size()); ++i) {
    auto id = ops::identAt(*bound, i, in.ConsumeIntegralInRange<int>(-4, 4));
    if (!id)
      fuzz::checkMessage(id.status());
  }
  return 0;
}
