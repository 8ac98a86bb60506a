// A user's custom operator library for the custom-op golden test:
// myops::scaled_gelu(x, scale) = gelu(x) * scale, with CPU and Meta kernels.
#include <torch/library.h>
#include <ATen/ATen.h>

namespace {
at::Tensor scaledGeluCpu(const at::Tensor &x, double scale) { return at::gelu(x) * scale; }
at::Tensor scaledGeluMeta(const at::Tensor &x, double scale) { return at::empty_like(x); }
} // namespace

TORCH_LIBRARY(myops, m) { m.def("scaled_gelu(Tensor x, float scale) -> Tensor"); }
TORCH_LIBRARY_IMPL(myops, CPU, m) { m.impl("scaled_gelu", scaledGeluCpu); }
TORCH_LIBRARY_IMPL(myops, Meta, m) { m.impl("scaled_gelu", scaledGeluMeta); }
