// nnsc-bench-activations PROGRAM_DIR: the activation memory of a one-rank
// program (rank0.py, rank0.pb from nnsc-codegen): CPU storage bytes alive at
// the end of the forward minus those alive before it (weights, inputs), from
// a counting CPU allocator (nnsc/Runtime/AllocationCounter.h), and the peak
// over forward and backward. Weights are random of the shards' shapes and
// integer inputs zero: the bytes do not depend on the values. Prints
//   activations_after_forward_bytes N
//   peak_over_forward_backward_bytes N
// for bench/recompute_memory.sh.
#include <iostream>

#include <ATen/ATen.h>

#include "nnsc/Runtime/AllocationCounter.h"
#include "nnsc/Runtime/Program.h"
#include "nnsc/Runtime/RngStreams.h"
#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/manifest.pb.h"

namespace {

at::ScalarType scalarTypeOf(const std::string &code) {
  if (code == "F64")
    return at::kDouble;
  if (code == "I64")
    return at::kLong;
  if (code == "I32")
    return at::kInt;
  if (code == "BOOL")
    return at::kBool;
  return at::kFloat;
}

int measure(const std::string &dir) {
  using namespace nnsc::rt;
  installCpuAllocationCounter();
  auto manifest = loadRankManifest(dir + "/rank0.pb");
  if (!manifest) {
    std::cerr << manifest.status().message() << '\n';
    return 1;
  }
  if (manifest->world_size() != 1) {
    std::cerr << "error: a one-rank program is needed (no communication groups)\n";
    return 1;
  }
  auto program = Program::load(dir + "/rank0.py");
  if (!program) {
    std::cerr << program.status().message() << '\n';
    return 1;
  }
  at::manual_seed(0);
  std::vector<c10::IValue> args;
  for (const ShardInfo &s : shardsOfManifest(*manifest)) {
    at::Tensor t = at::randn(s.shape, scalarTypeOf(s.dtype)) * 0.02;
    args.emplace_back(s.trainable ? t.requires_grad_(true) : t);
  }
  for (const auto &in : manifest->inputs()) {
    std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
    std::string code = safetensorsCodeOfProtoDType(in.dtype());
    args.emplace_back(code.rfind("F", 0) == 0 ? at::randn(shape)
                                              : at::zeros(shape, scalarTypeOf(code)));
  }
  args.emplace_back(c10::Device(c10::kCPU));
  setRngStreams(0, 0, "cpu");
  setRngForward(0);
  int64_t before = cpuLiveBytes();
  resetCpuPeakBytes();
  auto out = program->run(manifest->entry(), args);
  if (!out) {
    std::cerr << out.status().message() << '\n';
    return 2;
  }
  int64_t afterForward = cpuLiveBytes() - before;
  (*out)[static_cast<size_t>(std::max(0, manifest->loss_output()))].backward();
  std::cout << "activations_after_forward_bytes " << afterForward << '\n'
            << "peak_over_forward_backward_bytes " << cpuPeakBytes() - before << '\n';
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: nnsc-bench-activations PROGRAM_DIR (rank0.py and rank0.pb of a one-rank "
                 "program)\n";
    return 1;
  }
  try {
    return measure(argv[1]);
  } catch (const std::exception &e) {
    std::cerr << "error: " << e.what() << '\n';
    return 2;
  }
}
