// ZeRO-3's parameters (Zero3.h) on 2 ranks: a reducer whose buckets never mix
// units, the parameters of a unit bucket released to no elements and gathered
// whole again from the optimizer's ranges (nested gathers counted), a step's
// update reaching the next gather, the values for a checkpoint, a resume's
// values handed back, the next unit's all-gathers prefetched, and backward's
// first unit kept whole from its forward; and (one process, a fake peer) a
// failed prefetch reported where it is waited for.
#include "CommTestUtil.h" // first: see there

#include <c10/core/StorageImpl.h>

#include "SpawnWorkers.h"
#include "nnsc/Runtime/Reducer.h"
#include "nnsc/Runtime/Zero3.h"
#include "nnsc/Runtime/ZeroOptimizer.h"

using namespace nnsc;
using namespace nnsc::rt;

namespace {

size_t bytesHeld(const at::Tensor &t) { return t.storage().unsafeGetStorageImpl()->nbytes(); }

} // namespace

TEST_CASE("zero3 worker: gather and release", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = test::joinWorld();
  NNSC_REQUIRE_OK(world->addGroups({{1, {0, 1}}}));
  const int r = world->rank();
  // a, b in unit 0 ("f0"), c in unit 1 ("f1"), d in none.
  std::vector<std::vector<int64_t>> shapes{{2, 3}, {3}, {5}, {4}};
  std::vector<at::Tensor> ps, start;
  std::vector<std::string> names{"a", "b", "c", "d"};
  for (size_t i = 0; i < shapes.size(); ++i) {
    start.push_back(test::valueOf(int(i), shapes[i]).to(at::kFloat));
    ps.push_back(start.back().clone().requires_grad_(true));
  }
  Reducer reducer(world->group(1), ps, names, 1 << 20, /*average=*/true, std::chrono::seconds(30),
                  0, /*scatter=*/true, /*shardGrads=*/true, nullptr, {0, 0, 1, -1});
  REQUIRE(reducer.numBuckets() == 3); // reverse order: [d], [c], [b, a]
  CHECK(reducer.bucketUnit(0) == -1);
  CHECK(reducer.bucketUnit(1) == 1);
  CHECK(reducer.bucketUnit(2) == 0);
  OptimizerConfig sgd;
  sgd.name = "sgd";
  std::vector<OptimParam> optim;
  for (size_t i = 0; i < ps.size(); ++i)
    optim.push_back({names[i], ps[i], true});
  ZeroOptimizer zero(sgd, reducer, optim);
  CHECK(zero.shardsValues("a"));
  CHECK(zero.shardsValues("c"));
  CHECK_FALSE(zero.shardsValues("d"));
  Zero3Params params;
  params.add(reducer, zero, {"f0", "f1"});
  CHECK(params.numBuckets() == 2);
  params.releaseAll();
  for (int i : {0, 1, 2})
    CHECK(bytesHeld(ps[i]) == 0);
  CHECK(at::equal(ps[3], start[3])); // outside every unit: whole

  NNSC_REQUIRE_OK(params.gather("f0"));
  CHECK(at::equal(ps[0], start[0]));
  CHECK(at::equal(ps[1], start[1]));
  CHECK(bytesHeld(ps[2]) == 0);
  CHECK(params.aliases(ps[0].view({-1}).narrow(0, 1, 2)));
  CHECK_FALSE(params.aliases(ps[0].clone()));
  NNSC_REQUIRE_OK(params.gather("f0")); // nested: the outer call releases
  params.release("f0");
  CHECK(at::equal(ps[0], start[0]));
  params.release("f0");
  CHECK(bytesHeld(ps[0]) == 0);
  NNSC_REQUIRE_OK(params.gather("not a unit")); // nothing to gather

  // One step: gradients from gathered parameters, SGD at lr 1, the update
  // seen by the next gather as the mean gradient subtracted.
  NNSC_REQUIRE_OK(params.gather("f0"));
  NNSC_REQUIRE_OK(params.gather("f1"));
  reducer.prepare(true);
  at::Tensor loss = at::zeros({});
  std::vector<at::Tensor> weights;
  for (size_t i = 0; i < ps.size(); ++i) {
    weights.push_back(test::valueOf(r + 2, shapes[i]).to(at::kFloat));
    loss = loss + (ps[i] * weights[i]).sum();
  }
  loss.backward();
  params.release("f0");
  params.release("f1");
  NNSC_REQUIRE_OK(reducer.finish());
  NNSC_REQUIRE_OK(zero.step(1.0));
  NNSC_REQUIRE_OK(params.gather("f0"));
  NNSC_REQUIRE_OK(params.gather("f1"));
  for (size_t i = 0; i < ps.size(); ++i) {
    CAPTURE(i);
    at::Tensor mean =
        (test::valueOf(2, shapes[i]) + test::valueOf(3, shapes[i])).to(at::kFloat) / 2;
    CHECK(at::allclose(ps[i], start[i] - mean));
  }
  params.release("f0");
  params.release("f1");

  // A checkpoint's values, and a resume's handed back.
  auto whole = zero.gatherMasters();
  NNSC_REQUIRE_OK(whole.status());
  CHECK(whole->size() == 3);
  CHECK(whole->count("d") == 0);
  at::Tensor loaded = start[2] * 3;
  zero.loadMaster("c", loaded);
  NNSC_REQUIRE_OK(params.gather("f1"));
  CHECK(at::equal(ps[2], loaded));
  params.release("f1");

  // Prefetch: a pass learns which unit follows which (forward f0 then f1,
  // backward's re-runs f1 then f0); a gather then launches the next unit's
  // all-gathers without installing them, and that unit's gather takes them.
  using P = Zero3Params::Pass;
  // One micro-batch's gathers, each released after.
  auto forwardBackward = [&] {
    params.beginForward();
    for (auto [f, pass] : {std::pair{"f0", P::Forward},
                           {"f1", P::Forward},
                           {"f1", P::Backward},
                           {"f0", P::Backward}}) {
      NNSC_REQUIRE_OK(params.gather(f, pass));
      params.release(f);
    }
  };
  forwardBackward();
  const int64_t used = params.prefetchesUsed(), dropped = params.prefetchesDropped();
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward)); // launches f1's
  CHECK(bytesHeld(ps[2]) == 0);                     // not installed before f1's gather
  params.release("f0");
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  CHECK(params.prefetchesUsed() == used + 1);
  CHECK(at::equal(ps[2], loaded));
  params.release("f1");
  NNSC_REQUIRE_OK(params.gather("f1", P::Backward)); // not prefetched; launches f0's
  CHECK(params.prefetchesUsed() == used + 1);
  params.release("f1");
  NNSC_REQUIRE_OK(params.gather("f0", P::Backward));
  CHECK(params.prefetchesUsed() == used + 2);
  CHECK(at::equal(
      ps[0],
      start[0] - (test::valueOf(2, shapes[0]) + test::valueOf(3, shapes[0])).to(at::kFloat) / 2));
  params.release("f0");
  // Another unit's prefetch in flight is waited for and dropped; so is one
  // that drain() finds (before an optimizer step).
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward)); // launches f1's
  params.release("f0");
  NNSC_REQUIRE_OK(params.gather("f0", P::Backward)); // f1's dropped
  CHECK(params.prefetchesDropped() == dropped + 1);
  params.release("f0");
  // That forward ended after f0: the order is learned again.
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  params.release("f0");
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  CHECK(params.prefetchesUsed() == used + 2);
  params.release("f1");
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  params.release("f0");
  NNSC_REQUIRE_OK(params.drain());
  CHECK(params.prefetchesDropped() == dropped + 2);
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  CHECK(params.prefetchesUsed() == used + 2);
  CHECK(at::equal(ps[2], loaded));
  params.release("f1");
  // Off: nothing launched ahead.
  params.setPrefetch(false);
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  params.release("f0");
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  CHECK(params.prefetchesUsed() == used + 2);
  params.release("f1");
  NNSC_REQUIRE_OK(params.drain());
  CHECK(params.prefetchesDropped() == dropped + 2);
  // ... nor kept for backward.
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  params.release("f1", /*backwardFollows=*/true);
  CHECK(bytesHeld(ps[2]) == 0);

  // The unit backward re-runs first (f1, learned) stays whole from a
  // training forward to that re-run: no all-gather for it there.
  params.setPrefetch(true);
  forwardBackward(); // learns the first re-run again
  params.beginForward();
  const int64_t gathered = params.gathers(), usedBefore = params.prefetchesUsed();
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  params.release("f0", true); // not backward's first: freed
  CHECK(bytesHeld(ps[0]) == 0);
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  params.release("f1", true);
  CHECK(at::equal(ps[2], loaded)); // kept
  NNSC_REQUIRE_OK(params.gather("f1", P::Backward));
  CHECK(params.keptUsed() == 1);
  CHECK(params.gathers() == gathered + 2);
  CHECK(at::equal(ps[2], loaded));
  params.release("f1");
  CHECK(bytesHeld(ps[2]) == 0);
  NNSC_REQUIRE_OK(params.gather("f0", P::Backward)); // prefetched during f1's re-run
  CHECK(params.prefetchesUsed() == usedBefore + 2);
  params.release("f0");
  // Another unit's gather frees a kept unit (a validation forward after a
  // training one); so does drain() (before an optimizer step). Only a
  // training forward's release keeps.
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  params.release("f1");
  CHECK(bytesHeld(ps[2]) == 0);
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  params.release("f1", true);
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  CHECK(bytesHeld(ps[2]) == 0);
  params.release("f0");
  params.beginForward();
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  params.release("f1", true);
  CHECK(bytesHeld(ps[2]) > 0);
  NNSC_REQUIRE_OK(params.drain());
  CHECK(bytesHeld(ps[2]) == 0);
  NNSC_REQUIRE_OK(params.gather("f1", P::Backward)); // all-gathered anew
  CHECK(params.keptUsed() == 1);
  CHECK(at::equal(ps[2], loaded));
  params.release("f1");
  NNSC_REQUIRE_OK(params.drain());
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("ZeRO-3 gathers a unit's parameters from the shards and releases them",
          "[runtime][zero3]") {
  int port = test::freePort();
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 2; ++r)
    env.push_back(test::torchrunEnv(r, 2, port, /*agentStore=*/false));
  for (const auto &result :
       test::runWorkers("zero3 worker: gather and release", env, std::chrono::seconds(120))) {
    INFO(result.log);
    CHECK(result.status == 0);
  }
}

namespace {

// Work that finishes with `status` and counts its waits.
class CountedWork : public Work {
public:
  CountedWork(Status status, int &waits)
      : Work(std::chrono::milliseconds(0)), status_(std::move(status)), waits_(waits) {}
  Status wait(std::chrono::milliseconds) override {
    ++waits_;
    return status_;
  }

private:
  Status status_;
  int &waits_;
};

// A group of 2 in which this process is rank 0 and its peer sends the same
// range as this rank's, but never answers the `failAt`-th all-gather (0: none
// fails). Counts the all-gathers issued and the waits on them.
class FailingGather : public CommBackend {
public:
  FailingGather() : CommBackend(GroupInfo{1, {0, 1}, 0, kDefaultCommTimeout}) {}
  std::string name() const override { return "fake"; }
  int calls = 0, failAt = 0, waits = 0;

protected:
  WorkPtr doAllGather(const at::Tensor &input, std::vector<at::Tensor> &outputs) override {
    if (++calls == failAt)
      return std::make_shared<CountedWork>(Status::error("peer 1 is gone"), waits);
    for (at::Tensor &o : outputs)
      o.copy_(input);
    return std::make_shared<CountedWork>(Status::ok(), waits);
  }
};

} // namespace

// A prefetch whose first all-gather fails (of a unit of two buckets): the
// gather that takes it reports the error, naming the unit, after waiting for
// the other one too, and installs nothing (the next gather starts over); one
// that drain() drops reports it as prefetched, every all-gather waited for.
TEST_CASE("ZeRO-3 reports a failed prefetch where it is waited for", "[runtime][zero3]") {
  auto peer = std::make_shared<FailingGather>();
  std::vector<at::Tensor> ps{at::ones({4}).requires_grad_(true),
                             at::full({4}, 2.0).requires_grad_(true),
                             at::full({4}, 3.0).requires_grad_(true)};
  std::vector<std::string> names{"a", "b", "c"};
  // 16-byte buckets: one tensor each, [c], [b], [a]; b and c are f1's.
  Reducer reducer(peer, ps, names, 16, /*average=*/true, std::chrono::milliseconds(1000), 0,
                  /*scatter=*/true, /*shardGrads=*/true, nullptr, {0, 1, 1});
  REQUIRE(reducer.numBuckets() == 3);
  OptimizerConfig sgd;
  sgd.name = "sgd";
  ZeroOptimizer zero(sgd, reducer, {{"a", ps[0], true}, {"b", ps[1], true}, {"c", ps[2], true}});
  Zero3Params params;
  params.add(reducer, zero, {"f0", "f1"});
  params.releaseAll();
  using P = Zero3Params::Pass;
  // Learn the order: forward f0 then f1.
  params.beginForward();
  for (const char *f : {"f0", "f1"}) {
    NNSC_REQUIRE_OK(params.gather(f, P::Forward));
    params.release(f);
  }
  // f0's gather launches f1's two all-gathers ahead; the first fails.
  params.beginForward();
  peer->failAt = peer->calls + 2;
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  CHECK(peer->calls == peer->failAt + 1);
  params.release("f0");
  Status st = params.gather("f1", P::Forward);
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(),
             Catch::Matchers::ContainsSubstring("ZeRO-3 parameter all-gather for f1 on"));
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("first tensor 'c'"));
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("peer 1 is gone"));
  CHECK(peer->waits == peer->calls); // the one after the failure too
  CHECK(bytesHeld(ps[1]) == 0);
  CHECK(bytesHeld(ps[2]) == 0);
  CHECK(params.prefetchesUsed() == 0);
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward)); // all-gathered anew
  CHECK(at::equal(ps[1], at::full({4}, 2.0)));
  CHECK(at::equal(ps[2], at::full({4}, 3.0)));
  params.release("f1");
  CHECK(bytesHeld(ps[1]) == 0);
  // Dropped by drain(): reported as prefetched, every all-gather waited for.
  params.beginForward();
  peer->failAt = peer->calls + 2;
  NNSC_REQUIRE_OK(params.gather("f0", P::Forward));
  params.release("f0");
  st = params.drain();
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("for f1 (prefetched)"));
  CHECK(peer->waits == peer->calls);
  CHECK(params.prefetchesDropped() == 1);
  NNSC_REQUIRE_OK(params.drain());
  NNSC_REQUIRE_OK(params.gather("f1", P::Forward));
  CHECK(at::equal(ps[2], at::full({4}, 3.0)));
  params.release("f1");
}
