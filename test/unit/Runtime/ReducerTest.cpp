// The gradient reducer on 2 ranks (SpawnWorkers.h): buckets launch from the
// gradient hooks during backward, not at all before the last micro-batch,
// unused parameters count as zeros, and the result is the rank average.
#include "CommTestUtil.h" // first: see there

#include "SpawnWorkers.h"
#include "nnsc/Runtime/Reducer.h"

using namespace nnsc;
using namespace nnsc::rt;

namespace {

at::Tensor weight(int rank, int micro, at::IntArrayRef shape) {
  return test::valueOf(rank, shape).to(at::kFloat) * 0.5 + float(micro);
}

} // namespace

TEST_CASE("reducer worker: buckets during backward", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = test::joinWorld();
  int n = world->size(), r = world->rank();
  std::vector<int> all;
  for (int k = 0; k < n; ++k)
    all.push_back(k);
  NNSC_REQUIRE_OK(world->addGroups({{1, all}}));
  // Registration order; the first one stays unused, so it lands in the last
  // bucket (buckets follow reverse registration order).
  std::vector<at::Tensor> ps = {at::zeros({2}), at::zeros({8}), at::zeros({4, 4}), at::zeros({3})};
  for (auto &p : ps)
    p.requires_grad_(true);
  Reducer reducer(world->group(1), ps, {"unused", "a", "b", "c"}, /*bucketBytes=*/16,
                  /*average=*/true, test::workerTimeout());
  REQUIRE(reducer.numBuckets() >= 3);
  for (int micro = 0; micro < 2; ++micro) {
    reducer.prepare(micro == 1);
    at::Tensor loss = at::zeros({});
    for (size_t i = 1; i < ps.size(); ++i)
      loss = loss + (ps[i] * weight(r, micro, ps[i].sizes())).sum();
    loss.backward();
    // Before the last micro-batch nothing is sent; on it, every bucket whose
    // grads all arrived is in flight before finish() (the unused one is not).
    CHECK(reducer.launchedBuckets() == (micro == 0 ? 0 : reducer.numBuckets() - 1));
  }
  NNSC_REQUIRE_OK(reducer.finish());
  for (size_t i = 1; i < ps.size(); ++i) {
    at::Tensor want = at::zeros(ps[i].sizes());
    for (int k = 0; k < n; ++k)
      want = want + weight(k, 0, ps[i].sizes()) + weight(k, 1, ps[i].sizes());
    CHECK(at::equal(ps[i].grad(), want / n));
  }
  REQUIRE(ps[0].grad().defined());
  CHECK(at::equal(ps[0].grad(), at::zeros({2})));
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("reducer averages gradients on 2 ranks, overlapping backward", "[runtime][reducer]") {
  int port = test::freePort();
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 2; ++r)
    env.push_back(test::torchrunEnv(r, 2, port, /*agentStore=*/false));
  auto results =
      test::runWorkers("reducer worker: buckets during backward", env, std::chrono::seconds(120));
  for (const auto &result : results) {
    INFO(result.log);
    CHECK(result.status == 0);
  }
}
