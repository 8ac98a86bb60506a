#pragma once
// Shared pieces of the communication tests: per-rank test values, joining
// the world from the launcher variables, and checks of each raw collective.
//
// Include this header before anything else: LibTorch pulls in glog, whose
// CHECK macro (abort on failure) would replace Catch2's if catch.hpp came
// first. Here LibTorch comes first and Catch2's CHECK wins.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>
#ifndef NNSC_CATCH_COMPAT_H // in a unity batch an earlier file may have brought Catch2's
#undef CHECK
#endif
#include "../CatchCompat.h"

#include "nnsc/Runtime/Comm.h"

/// Fails the test case with the Status message unless `expr` is ok.
#define NNSC_REQUIRE_OK(expr)                                                                      \
  do {                                                                                             \
    ::nnsc::Status nnsc_s_ = (expr);                                                               \
    INFO(nnsc_s_.message());                                                                       \
    REQUIRE(nnsc_s_.isOk());                                                                       \
  } while (0)

namespace nnsc::test {

/// What rank `r` contributes: distinct per rank and element, exact in double.
inline at::Tensor valueOf(int r, at::IntArrayRef shape) {
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  return at::arange(numel, at::kDouble).reshape(shape) + 100.0 * (r + 1);
}

/// Rank `r`'s loss weights, so each rank's gradient differs.
inline at::Tensor weightOf(int r, at::IntArrayRef shape) {
  return valueOf(r, shape) * 0.25 - 7.0 * r;
}

/// The timeout workers use: NNSC_TEST_TIMEOUT_MS, else 30 s.
inline std::chrono::milliseconds workerTimeout() {
  const char *ms = std::getenv("NNSC_TEST_TIMEOUT_MS");
  return std::chrono::milliseconds(ms ? std::atoi(ms) : 30000);
}

inline std::unique_ptr<rt::CommWorld> joinWorld() {
  auto env = rt::readLaunchEnv();
  NNSC_REQUIRE_OK(env.status());
  rt::CommOptions options;
  options.timeout = workerTimeout();
  auto world = rt::CommWorld::create(*env, options);
  NNSC_REQUIRE_OK(world.status());
  return world.take();
}

inline void checkAllReduce(rt::CommBackend &g) {
  int n = g.size(), r = g.rank();
  at::Tensor sum = valueOf(0, {2, 3});
  for (int k = 1; k < n; ++k)
    sum = sum + valueOf(k, {2, 3});
  // Mixed dtypes (one allreduce each), then one dtype (coalesced).
  std::vector<at::Tensor> mixed{valueOf(r, {2, 3}), valueOf(r, {2, 3}).to(at::kLong)};
  NNSC_REQUIRE_OK(g.allReduce(mixed)->wait());
  CHECK(at::equal(mixed[0], sum));
  CHECK(at::equal(mixed[1], sum.to(at::kLong)));
  std::vector<at::Tensor> same{valueOf(r, {2, 3}), valueOf(r, {5}) * (r + 1)};
  NNSC_REQUIRE_OK(g.allReduce(same)->wait());
  CHECK(at::equal(same[0], sum));
  at::Tensor scaled = at::zeros({5}, at::kDouble);
  for (int k = 0; k < n; ++k)
    scaled = scaled + valueOf(k, {5}) * (k + 1);
  CHECK(at::equal(same[1], scaled));
  std::vector<at::Tensor> max{valueOf(r, {4})};
  NNSC_REQUIRE_OK(g.allReduce(max, rt::ReduceOp::Max)->wait());
  CHECK(at::equal(max[0], valueOf(n - 1, {4})));
}

inline void checkGatherScatter(rt::CommBackend &g) {
  int n = g.size(), r = g.rank();
  std::vector<at::Tensor> parts(n);
  for (at::Tensor &p : parts)
    p = at::empty({2, 3}, at::kDouble);
  NNSC_REQUIRE_OK(g.allGather(valueOf(r, {2, 3}), parts)->wait());
  for (int k = 0; k < n; ++k)
    CHECK(at::equal(parts[k], valueOf(k, {2, 3})));
  // Rank k's input j is valueOf(k) + j; rank r receives sum_k valueOf(k) + n r.
  std::vector<at::Tensor> inputs;
  at::Tensor expected = at::zeros({3}, at::kDouble) + n * r;
  for (int j = 0; j < n; ++j)
    inputs.push_back(valueOf(r, {3}) + j);
  for (int k = 0; k < n; ++k)
    expected = expected + valueOf(k, {3});
  at::Tensor out = at::empty({3}, at::kDouble);
  NNSC_REQUIRE_OK(g.reduceScatter(inputs, out)->wait());
  CHECK(at::equal(out, expected));
  NNSC_REQUIRE_OK(g.reduceScatter(inputs, out, rt::ReduceOp::Max)->wait());
  CHECK(at::equal(out, valueOf(n - 1, {3}) + r));
}

inline void checkAllToAllAndP2p(rt::CommBackend &g) {
  int n = g.size(), r = g.rank();
  // Slice j of rank i holds 10 i + j; after the exchange slice i holds 10 i + r.
  at::Tensor in = at::empty({n, 2}, at::kDouble), out = at::empty({n, 2}, at::kDouble);
  for (int j = 0; j < n; ++j)
    in[j].fill_(10 * r + j);
  NNSC_REQUIRE_OK(g.allToAll(in, out)->wait());
  for (int i = 0; i < n; ++i)
    CHECK(at::equal(out[i], at::full({2}, 10.0 * i + r, at::kDouble)));
  std::vector<at::Tensor> b{valueOf(r, {3}), valueOf(r, {2}).to(at::kInt)};
  NNSC_REQUIRE_OK(g.broadcast(b, n - 1)->wait());
  CHECK(at::equal(b[0], valueOf(n - 1, {3})));
  CHECK(at::equal(b[1], valueOf(n - 1, {2}).to(at::kInt)));
  if (n > 1) { // a ring: send to the next rank, receive from the previous
    at::Tensor got = at::empty({4}, at::kDouble);
    rt::WorkPtr sent = g.send(valueOf(r, {4}), (r + 1) % n, /*tag=*/7);
    rt::WorkPtr received = g.recv(got, (r + n - 1) % n, /*tag=*/7);
    NNSC_REQUIRE_OK(sent->wait());
    NNSC_REQUIRE_OK(received->wait());
    CHECK(at::equal(got, valueOf((r + n - 1) % n, {4})));
  }
  NNSC_REQUIRE_OK(g.barrier()->wait());
}

/// Every raw collective of `g`, checked against hand-computed values.
inline void checkCollectives(rt::CommBackend &g) {
  INFO("on " << g.group().describe() << " as rank " << g.rank());
  checkAllReduce(g);
  checkGatherScatter(g);
  checkAllToAllAndP2p(g);
}

} // namespace nnsc::test
