#pragma once
/// What the fuzz targets share: the input as text, the check that turns a
/// broken invariant into a finding, and the seed corpus's graph.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nnsc/IR/Serialize.h"
#include "nnsc/Support/File.h"

/// Aborts (libFuzzer saves the input as a crash) when `cond` is false.
#define NNSC_FUZZ_CHECK(cond, what)                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "fuzz invariant failed: %s: %s\n", #cond, std::string(what).c_str());   \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)

namespace nnsc::fuzz {

/// The fuzzer's bytes as a string.
inline std::string bytesOf(const uint8_t *data, size_t size) {
  return std::string(reinterpret_cast<const char *>(data), size);
}

/// A failed read must say something; an empty message is a finding.
inline void checkMessage(const Status &st) {
  NNSC_FUZZ_CHECK(!st.message().empty(), "an error without a message");
}

/// The MLP graph of the seed corpus (fuzz/corpus/graph_pb/mlp-tiny.pb, made
/// by nnsc-trace from examples/mlp --config tiny): what plans are checked
/// against. Loaded once.
inline const ir::Graph &seedGraph() {
  static const ir::Graph graph = [] {
    auto g = ir::readGraph(NNSC_FUZZ_CORPUS "/graph_pb/mlp-tiny.pb");
    if (!g) {
      std::fprintf(stderr, "%s\n", g.status().message().c_str());
      std::abort();
    }
    return g.take();
  }();
  return graph;
}

} // namespace nnsc::fuzz
