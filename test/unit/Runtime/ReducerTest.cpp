// The gradient reducer on 2 ranks (SpawnWorkers.h): buckets launch from the
// gradient hooks during backward, not at all before the last micro-batch,
// unused parameters count as zeros, and the result is the rank average;
// ZeRO-1's optimizer over a scattering reducer with optimizer.fused; bucket
// views; and ZeRO-2's sharded gradients against ZeRO-1's.
#include "CommTestUtil.h" // first: see there

#include <set>

#include "OpRecorder.h"
#include "SpawnWorkers.h"
#include "nnsc/Runtime/Optimizer.h"
#include "nnsc/Runtime/Reducer.h"
#include "nnsc/Runtime/ZeroOptimizer.h"
#include "nnsc/Torch/Compat.h"

using namespace nnsc;
using namespace nnsc::rt;

namespace {

at::Tensor weight(int rank, int micro, at::IntArrayRef shape) {
  return test::valueOf(rank, shape).to(at::kFloat) * 0.5 + float(micro);
}

// A worker's world with group 1 over every rank.
std::unique_ptr<CommWorld> joinWithGroupOfAll() {
  std::unique_ptr<CommWorld> world = test::joinWorld();
  std::vector<int> all;
  for (int k = 0; k < world->size(); ++k)
    all.push_back(k);
  NNSC_REQUIRE_OK(world->addGroups({{1, all}}));
  return world;
}

// Runs the worker test case `worker` on 2 ranks; each must exit 0.
void runOnTwoRanks(const std::string &worker) {
  int port = test::freePort();
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 2; ++r)
    env.push_back(test::torchrunEnv(r, 2, port, /*agentStore=*/false));
  for (const auto &result : test::runWorkers(worker, env, std::chrono::seconds(120))) {
    INFO(result.log);
    CHECK(result.status == 0);
  }
}

} // namespace

TEST_CASE("reducer worker: buckets during backward", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = joinWithGroupOfAll();
  int n = world->size(), r = world->rank();
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
  runOnTwoRanks("reducer worker: buckets during backward");
}

// Pipelines arm parameters one by one, before the last backward that adds to
// each (Reducer::arm). Two "chunks" whose backward passes interleave: chunk
// 1's bucket goes out during chunk 1's last backward, while chunk 0 still has
// one to run; a parameter no chunk reads goes out at finish(), after armAll().
TEST_CASE("reducer worker: armed per parameter", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = joinWithGroupOfAll();
  int n = world->size(), r = world->rank();
  // Registration order; buckets (one per tensor of 16 bytes) follow the
  // reverse: [chunk1], [chunk0], [unread].
  std::vector<at::Tensor> ps = {at::zeros({4}), at::zeros({4}), at::zeros({4})};
  for (auto &p : ps)
    p.requires_grad_(true);
  Reducer reducer(world->group(1), ps, {"unread", "chunk0", "chunk1"}, /*bucketBytes=*/16,
                  /*average=*/true, test::workerTimeout());
  REQUIRE(reducer.numBuckets() == 3);
  auto pass = [&](size_t i, int micro) {
    (ps[i] * weight(r, micro, ps[i].sizes())).sum().backward();
  };
  for (int step = 0; step < 2; ++step) { // the second step starts from fresh state
    for (auto &p : ps)
      p.mutable_grad() = at::Tensor();
    reducer.prepare(false);
    // Backward passes: chunk 1 m0, chunk 0 m0, chunk 1 m1, chunk 0 m1.
    pass(2, 0);
    pass(1, 0);
    CHECK(reducer.launchedBuckets() == 0);
    reducer.arm(2);
    pass(2, 1);
    CHECK(reducer.launchedBuckets() == 1); // chunk 1's, before chunk 0's last pass
    reducer.arm(1);
    pass(1, 1);
    CHECK(reducer.launchedBuckets() == 2);
    reducer.armAll();
    NNSC_REQUIRE_OK(reducer.finish());
    CHECK(reducer.launchedBuckets() == 3);
    for (size_t i = 1; i < 3; ++i) {
      at::Tensor want = at::zeros(ps[i].sizes());
      for (int k = 0; k < n; ++k)
        want = want + weight(k, 0, ps[i].sizes()) + weight(k, 1, ps[i].sizes());
      CHECK(at::equal(ps[i].grad(), want / n));
    }
    REQUIRE(ps[0].grad().defined());
    CHECK(at::equal(ps[0].grad(), at::zeros({4})));
  }
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("reducer arms parameters one at a time under a pipeline schedule",
          "[runtime][reducer]") {
  runOnTwoRanks("reducer worker: armed per parameter");
}

// A 16-bit bucket is divided before its reduction (Reducer.cpp dividesFirst):
// two ranks' fp16 gradients of 40000 sum to 80000, past fp16's 65504, while
// their mean does not. Gloo, like NCCL, hands back an fp16 sum; dividing after
// it would leave inf.
TEST_CASE("reducer worker: fp16 bucket divided first", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = joinWithGroupOfAll();
  at::Tensor p = at::zeros({4}, at::kHalf).requires_grad_(true);
  at::Tensor master = at::zeros({4}, at::kFloat).requires_grad_(true);
  Reducer reducer(world->group(1), {p}, {"p"}, /*bucketBytes=*/1 << 20, /*average=*/true,
                  test::workerTimeout());
  reducer.setMainGrads({master}, at::kHalf);
  reducer.prepare(true);
  (p.to(at::kFloat) * 40000.0f).sum().backward();
  NNSC_REQUIRE_OK(reducer.finish());
  REQUIRE(master.grad().defined());
  INFO(master.grad());
  CHECK(at::equal(master.grad(), at::full({4}, 40000.0f)));
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("reducer divides a 16-bit bucket before reducing it", "[runtime][reducer]") {
  runOnTwoRanks("reducer worker: fp16 bucket divided first");
}

#if NNSC_TORCH_AT_LEAST(2, 4)
// ZeRO-1 with optimizer.fused: every rank's owned ranges go through the fused
// kernel, and the parameters the ranks gather match a plain single-tensor
// optimizer's on the averaged gradients, for AdamW and, over two steps (the
// first starts the momentum buffers), SGD.
TEST_CASE("reducer worker: ZeRO-1 fused update", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = joinWithGroupOfAll();
  int n = world->size(), r = world->rank();
  for (const auto &[name, kernel] :
       {std::pair{"adamw", "aten::_fused_adamw_"}, std::pair{"sgd", "aten::_fused_sgd_"}}) {
    CAPTURE(name);
    OptimizerConfig fused;
    fused.name = name;
    fused.momentum = 0.9;
    fused.weightDecay = 0.1;
    fused.fused = "true";
    OptimizerConfig plain = fused;
    plain.fused = "false";
    std::vector<at::Tensor> ps = {test::valueOf(0, {8}).to(at::kFloat) * 0.01,
                                  test::valueOf(1, {4, 4}).to(at::kFloat) * 0.01};
    std::vector<at::Tensor> qs = {ps[0].clone().requires_grad_(true),
                                  ps[1].clone().requires_grad_(true)};
    for (auto &p : ps)
      p.requires_grad_(true);
    Reducer reducer(world->group(1), ps, {"a", "b"}, /*bucketBytes=*/16, /*average=*/true,
                    test::workerTimeout(), /*divisor=*/0, /*scatter=*/true);
    ZeroOptimizer zero(fused, reducer, {{"a", ps[0], false}, {"b", ps[1], true}});
    Optimizer reference(plain, {{"a", qs[0], false}, {"b", qs[1], true}});
    for (int step = 0; step < 2; ++step) {
      reducer.prepare(true);
      ((ps[0] * weight(r, step, {8})).sum() + (ps[1] * weight(r, step, {4, 4})).sum()).backward();
      NNSC_REQUIRE_OK(reducer.finish());
      Status stepped = Status::ok();
      std::set<std::string> ran = test::operatorsRunBy([&] { stepped = zero.step(1e-2); });
      NNSC_REQUIRE_OK(stepped);
      CHECK(ran.count(kernel) == 1);
      zero.zeroGrad();
      for (auto &q : qs) {
        at::Tensor mean = at::zeros(q.sizes());
        for (int k = 0; k < n; ++k)
          mean = mean + weight(k, step, q.sizes());
        q.mutable_grad() = mean / n;
      }
      reference.step(1e-2);
      for (size_t i = 0; i < ps.size(); ++i)
        CHECK(at::allclose(ps[i].detach(), qs[i].detach(), 1e-6, 1e-7));
    }
  }
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("ZeRO-1 updates its owned ranges with the fused kernels", "[runtime][reducer]") {
  runOnTwoRanks("reducer worker: ZeRO-1 fused update");
}
#endif

namespace {

// One side of the bucket-view comparison: parameters (16-bit under mixed
// precision, with float32 masters) and their reducer.
struct Side {
  std::vector<at::Tensor> ps, masters;
  std::unique_ptr<Reducer> reducer;

  Side(CommWorld &world, bool views, bool mixed, bool scatter, bool zero2 = false,
       at::ScalarType reduceDtype = at::kFloat) {
    const at::ScalarType dtype = mixed ? at::kBFloat16 : at::kFloat;
    for (auto shape : {std::vector<int64_t>{3}, std::vector<int64_t>{2}, std::vector<int64_t>{4, 4},
                       std::vector<int64_t>{5}}) {
      at::Tensor v = test::valueOf(int(ps.size()), shape).to(at::kFloat) * 0.01;
      ps.push_back(v.to(dtype).requires_grad_(true));
      masters.push_back(v.clone().requires_grad_(true));
    }
    // 16-byte buckets, in launch order: float32 [5], [4x4], [2, 3]; bf16
    // [5, 4x4], [2, 3] ("unused" is ps[0]).
    reducer = std::make_unique<Reducer>(
        world.group(1), ps, std::vector<std::string>{"unused", "a", "b", "c"},
        /*bucketBytes=*/16, /*average=*/true, test::workerTimeout(), /*divisor=*/0, scatter, zero2);
    if (mixed)
      reducer->setMainGrads(masters, reduceDtype);
    reducer->useBucketViews(views);
  }
  at::Tensor &holder(size_t i) { return reducer->hasMainGrads() ? masters[i] : ps[i]; }

  // One step of two micro-batches on rank r (ps[0] stays unused); mixed
  // precision folds the first into the masters' grads as the trainer does.
  // ZeRO-2 reduces both, the first completed before the second's backward.
  void step(int r, int step) {
    for (int micro = 0; micro < 2; ++micro) {
      if (reducer->hasMainGrads() && micro > 0)
        for (size_t i = 0; i < ps.size(); ++i)
          if (ps[i].grad().defined()) {
            at::Tensor &main = masters[i].mutable_grad();
            if (main.defined())
              main.add_(ps[i].grad());
            else
              main = ps[i].grad().to(at::kFloat);
            ps[i].mutable_grad() = at::Tensor();
          }
      reducer->prepare(micro == 1 || reducer->shardsGradients());
      at::Tensor loss = at::zeros({});
      for (size_t i = 1; i < ps.size(); ++i)
        loss = loss + (ps[i].to(at::kFloat) * weight(r, 2 * step + micro, ps[i].sizes())).sum();
      loss.backward();
      if (micro == 0 && reducer->shardsGradients())
        NNSC_REQUIRE_OK(reducer->finish());
    }
  }
  // As the optimizers' zeroGrad: in place.
  void zeroGrads() {
    for (size_t i = 0; i < ps.size(); ++i)
      if (holder(i).grad().defined())
        holder(i).mutable_grad().detach().zero_();
  }
};

bool sameStorage(const at::Tensor &a, const at::Tensor &b) {
  return a.defined() && b.defined() && a.is_alias_of(b);
}

} // namespace

// Gradients as views of the buckets (Reducer::useBucketViews): bit for bit
// the results of bucket copies over two steps of two micro-batches, for
// float32, mixed precision's float32 main grads and ZeRO-1's shards; the
// holders share their bucket's storage from the first backward on (with
// copies they do not), a .grad replaced from outside becomes a view again,
// and ZeRO's parameter all-gather, which borrows the buckets, leaves the
// views zero.
TEST_CASE("reducer worker: bucket views", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = joinWithGroupOfAll();
  int r = world->rank();
  for (auto [mixed, scatter] :
       {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    CAPTURE(mixed, scatter);
    Side views(*world, true, mixed, scatter), copies(*world, false, mixed, scatter);
    const size_t buckets = views.reducer->numBuckets();
    REQUIRE(buckets == (mixed ? 2 : 3));
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      if (step == 2) // replaced from outside: copied in at the launch, a view after finish
        views.holder(1).mutable_grad() = at::zeros_like(views.holder(1));
      views.step(r, step);
      copies.step(r, step);
      NNSC_REQUIRE_OK(views.reducer->finish());
      NNSC_REQUIRE_OK(copies.reducer->finish());
      CHECK(views.reducer->bucketViews());
      CHECK_FALSE(copies.reducer->bucketViews());
      // [2, 3] share the last bucket; with copies each has its own storage.
      CHECK(sameStorage(views.holder(1).grad(), views.holder(0).grad()));
      CHECK_FALSE(sameStorage(copies.holder(1).grad(), copies.holder(0).grad()));
      if (scatter) {
        for (size_t b = 0; b < buckets; ++b)
          CHECK(at::equal(views.reducer->gradShard(b), copies.reducer->gradShard(b)));
        NNSC_REQUIRE_OK(views.reducer->gatherParams());
        NNSC_REQUIRE_OK(copies.reducer->gatherParams());
        for (size_t i = 0; i < views.ps.size(); ++i) {
          CHECK(at::equal(views.ps[i], copies.ps[i]));
          CHECK(at::equal(views.ps[i].grad(), at::zeros_like(views.ps[i])));
        }
      } else {
        for (size_t i = 0; i < views.ps.size(); ++i) {
          CAPTURE(i);
          REQUIRE(views.holder(i).grad().defined());
          CHECK(views.holder(i).grad().scalar_type() == at::kFloat);
          CHECK(at::equal(views.holder(i).grad(), copies.holder(i).grad()));
          CHECK(views.ps[i].grad().defined() == !mixed); // mixed: 16-bit parts dropped
        }
        CHECK(at::equal(views.holder(0).grad(), at::zeros({3})));
        // Not all zero: the comparison above has something to compare.
        CHECK(views.holder(2).grad().abs().sum().item<float>() > 0);
      }
      views.zeroGrads();
      copies.zeroGrads();
    }
  }
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("reducer keeps the gradients in its buckets, as copies would", "[runtime][reducer]") {
  runOnTwoRanks("reducer worker: bucket views");
}

// ZeRO-2 (the Reducer's shardGrads) against ZeRO-1 over two steps of two
// micro-batches, float32 and mixed precision: the same reduced shards (the
// gradients are half-integers, so reducing each micro-batch and summing the
// shards adds exactly what summing first does); with bf16 buckets the shards
// still sum in float32, within bf16's rounding of ZeRO-1's; no gradient left on any
// parameter or master after a backward (dropped as their bucket launched),
// more buckets than ZeRO-2 keeps in flight (so backward itself waits for the
// oldest), and the windowed parameter all-gather writing what ZeRO-1's does.
TEST_CASE("reducer worker: ZeRO-2", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = joinWithGroupOfAll();
  int r = world->rank();
  for (auto [mixed, reduceDtype] : {std::pair{false, at::kFloat}, std::pair{true, at::kFloat},
                                    std::pair{true, at::kBFloat16}}) {
    CAPTURE(mixed, reduceDtype);
    const bool exact = reduceDtype == at::kFloat;
    Side two(*world, true, mixed, /*scatter=*/true, /*zero2=*/true, reduceDtype);
    Side one(*world, true, mixed, /*scatter=*/true);
    REQUIRE(two.reducer->shardsGradients());
    CHECK_FALSE(one.reducer->shardsGradients());
    CHECK_FALSE(two.reducer->viewsPossible()); // no whole gradients to be views of
    const size_t buckets = two.reducer->numBuckets();
    REQUIRE(buckets == (mixed ? 2 : 3));
    static_assert(Reducer::kZero2InFlight == 2, "float32's 3 buckets: one wait inside backward");
    for (int step = 0; step < 2; ++step) {
      CAPTURE(step);
      two.step(r, step);
      one.step(r, step);
      NNSC_REQUIRE_OK(two.reducer->finish());
      NNSC_REQUIRE_OK(one.reducer->finish());
      for (size_t i = 0; i < two.ps.size(); ++i) {
        CAPTURE(i);
        CHECK_FALSE(two.ps[i].grad().defined());
        CHECK_FALSE(two.masters[i].grad().defined());
      }
      float magnitude = 0; // not all zero: the comparison has something to compare
      for (size_t b = 0; b < buckets; ++b) {
        CAPTURE(b);
        CHECK(two.reducer->gradShard(b).scalar_type() == at::kFloat);
        if (exact)
          CHECK(at::equal(two.reducer->gradShard(b), one.reducer->gradShard(b)));
        else
          CHECK(at::allclose(two.reducer->gradShard(b), one.reducer->gradShard(b), 1e-2));
        magnitude += two.reducer->gradShard(b).abs().sum().item<float>();
      }
      CHECK(magnitude > 0);
      // Each rank's shard written back as the parameters' values.
      std::vector<at::Tensor> ownedTwo, ownedOne;
      for (size_t b = 0; b < buckets; ++b) {
        ownedTwo.push_back(two.reducer->gradShard(b).to(two.ps[0].scalar_type()));
        ownedOne.push_back(one.reducer->gradShard(b).to(one.ps[0].scalar_type()));
      }
      NNSC_REQUIRE_OK(two.reducer->gatherParams(ownedTwo));
      NNSC_REQUIRE_OK(one.reducer->gatherParams(ownedOne));
      for (size_t i = 0; i < two.ps.size(); ++i)
        CHECK((exact ? at::equal(two.ps[i], one.ps[i])
                     : at::allclose(two.ps[i].to(at::kFloat), one.ps[i].to(at::kFloat), 1e-2)));
      two.reducer->clearGradShards(); // as ZeroOptimizer::zeroGrad after the update
      one.zeroGrads();
    }
  }
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("ZeRO-2 reduces every micro-batch into the shards and keeps no gradients",
          "[runtime][reducer]") {
  runOnTwoRanks("reducer worker: ZeRO-2");
}

// ZeRO in blocks on 4 ranks, 2 blocks of 2: group 1 every rank, 2 and 3 the
// blocks, 4 and 5 the ranks at the same place in each. Five one-weight
// buckets, so that backward sends cross sums (more than 2 reduce-scatters
// under way) and ZeRO-2 waits for them; two micro-batches a step. Each
// rank's shard must be its range of the mean over all 4 ranks of the
// step's gradients, the parameters gathered from the shards the same in
// every block.
TEST_CASE("reducer worker: ZeRO in blocks", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = test::joinWorld();
  REQUIRE(world->size() == 4);
  const int r = world->rank(), n = 4;
  NNSC_REQUIRE_OK(
      world->addGroups({{1, {0, 1, 2, 3}}, {2, {0, 1}}, {3, {2, 3}}, {4, {0, 2}}, {5, {1, 3}}}));
  auto block = world->group(r < 2 ? 2 : 3), cross = world->group(r % 2 == 0 ? 4 : 5);
  const std::vector<std::vector<int64_t>> shapes{{5}, {4}, {3, 2}, {7}, {4}};
  for (bool zero2 : {false, true}) {
    CAPTURE(zero2);
    std::vector<at::Tensor> ps;
    for (const auto &shape : shapes)
      ps.push_back(at::zeros(shape).requires_grad_(true));
    Reducer reducer(block, ps, {"a", "b", "c", "d", "e"}, /*bucketBytes=*/16, /*average=*/true,
                    test::workerTimeout(), /*divisor=*/0, /*scatter=*/true, zero2, cross);
    REQUIRE(reducer.numBuckets() == 5);
    CHECK(reducer.shardCopies() == 2);
    for (int step = 0; step < 2; ++step) {
      CAPTURE(step);
      for (int micro = 0; micro < 2; ++micro) {
        reducer.prepare(zero2 || micro == 1);
        at::Tensor loss = at::zeros({});
        for (size_t i = 0; i < ps.size(); ++i)
          loss = loss + (ps[i] * weight(r + int(i), 2 * step + micro, ps[i].sizes())).sum();
        loss.backward();
        if (zero2 && micro == 0)
          NNSC_REQUIRE_OK(reducer.finish());
      }
      NNSC_REQUIRE_OK(reducer.finish());
      for (size_t b = 0; b < reducer.numBuckets(); ++b) {
        CAPTURE(b);
        // The bucket's flat of the mean of the step's gradients, padded.
        const ZeroBucketLayout &z = reducer.zeroLayout(b);
        at::Tensor flat = at::zeros({z.padded});
        int64_t offset = 0;
        for (size_t m : reducer.bucketMembers(b)) {
          at::Tensor mean = at::zeros(ps[m].sizes());
          for (int k = 0; k < n; ++k)
            for (int micro = 0; micro < 2; ++micro)
              mean = mean + weight(k + int(m), 2 * step + micro, ps[m].sizes()) / n;
          flat.narrow(0, offset, mean.numel()).copy_(mean.reshape({-1}));
          offset += mean.numel();
        }
        CHECK(z.shardNumel == (z.padded + 1) / 2);
        CHECK(at::allclose(reducer.gradShard(b), flat.narrow(0, z.shardBegin, z.shardNumel), 1e-5,
                           1e-6));
      }
      std::vector<at::Tensor> owned;
      for (size_t b = 0; b < reducer.numBuckets(); ++b)
        owned.push_back(reducer.gradShard(b).clone());
      NNSC_REQUIRE_OK(reducer.gatherParams(owned));
      // Every rank now holds the whole mean gradient as its parameters.
      for (auto &p : ps) {
        std::vector<at::Tensor> all{p.detach().clone()};
        NNSC_REQUIRE_OK(world->group(1)->allReduce(all)->wait());
        CHECK(at::allclose(all[0] / n, p.detach(), 1e-6, 1e-7));
      }
      if (zero2)
        reducer.clearGradShards();
      else
        for (auto &p : ps)
          p.mutable_grad().zero_();
    }
  }
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("ZeRO in blocks sums the shards over the blocks", "[runtime][reducer]") {
  int port = test::freePort();
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 4; ++r)
    env.push_back(test::torchrunEnv(r, 4, port, /*agentStore=*/false));
  for (const auto &result :
       test::runWorkers("reducer worker: ZeRO in blocks", env, std::chrono::seconds(120))) {
    INFO(result.log);
    CHECK(result.status == 0);
  }
}

namespace {

// A group of 2 in which this process is rank 0 and its peer never answers
// the `failAt`-th reduce-scatter (0: every one succeeds, each returning this
// rank's own chunk as if the peer had sent zeros).
class FailingPeer : public CommBackend {
public:
  FailingPeer() : CommBackend(GroupInfo{1, {0, 1}, 0, kDefaultCommTimeout}) {}
  std::string name() const override { return "fake"; }
  int calls = 0, failAt = 0;

protected:
  WorkPtr doReduceScatter(const std::vector<at::Tensor> &inputs, at::Tensor &output,
                          ReduceOp) override {
    if (++calls == failAt)
      return Work::finished(Status::error("peer 1 is gone"));
    output.copy_(inputs[size_t(rank())]);
    return Work::finished(Status::ok());
  }
};

} // namespace

// ZeRO-2 when a wait inside backward fails: the error is kept and finish()
// returns it, naming the bucket; nothing more goes on the wire after it (5
// one-weight buckets, launched one backward at a time: buckets 0 to 2 are
// sent, the wait for bucket 0 fails before bucket 3); the gradients are
// dropped all the same; and the next step reduces as if nothing happened.
TEST_CASE("ZeRO-2 reports a failed wait from backward and sends nothing after it",
          "[runtime][reducer]") {
  auto peer = std::make_shared<FailingPeer>();
  std::vector<at::Tensor> ps;
  std::vector<std::string> names;
  for (int k = 0; k < 5; ++k) {
    ps.push_back(at::zeros({4}).requires_grad_(true));
    names.push_back(fmt::format("w{}", k));
  }
  Reducer reducer(peer, ps, names, /*bucketBytes=*/16, /*average=*/true,
                  std::chrono::milliseconds(1000), /*divisor=*/0, /*scatter=*/true,
                  /*shardGrads=*/true);
  REQUIRE(reducer.numBuckets() == 5);
  // Buckets follow reverse registration order: bucket b holds w(4 - b).
  auto backwardInBucketOrder = [&] {
    reducer.prepare(true);
    for (int k = 4; k >= 0; --k)
      (ps[size_t(k)] * 1.0).sum().backward();
  };
  peer->failAt = 1;
  backwardInBucketOrder();
  CHECK(peer->calls == 3);
  Status st = reducer.finish();
  REQUIRE_FALSE(st.isOk());
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("bucket 0 of 5 (first tensor 'w4')"));
  CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("peer 1 is gone"));
  CHECK(peer->calls == 3);
  for (const at::Tensor &p : ps)
    CHECK_FALSE(p.grad().defined());

  peer->failAt = 0;
  reducer.clearGradShards();
  backwardInBucketOrder();
  NNSC_REQUIRE_OK(reducer.finish());
  CHECK(peer->calls == 8);
  for (size_t b = 0; b < reducer.numBuckets(); ++b) // this rank's half of ones, averaged
    CHECK(at::equal(reducer.gradShard(b), at::full({2}, 0.5)));
}

namespace {

// The other block's rank at this rank's place, as a group of 2 whose peer
// sends zeros and never answers the `failAt`-th all-reduce (0: none fails).
class FailingCross : public CommBackend {
public:
  FailingCross() : CommBackend(GroupInfo{2, {0, 2}, 0, kDefaultCommTimeout}) {}
  std::string name() const override { return "fake"; }
  int calls = 0, failAt = 0;

protected:
  WorkPtr doAllReduce(std::vector<at::Tensor> &, ReduceOp) override {
    if (++calls == failAt)
      return Work::finished(Status::error("the other block is gone"));
    return Work::finished(Status::ok());
  }
};

} // namespace

// ZeRO in blocks when a sum over the blocks fails: finish() names it and the
// bucket; ZeRO-2 sees it inside backward (2 buckets after it) and sends
// nothing more over the blocks; the next step reduces as if nothing happened.
TEST_CASE("ZeRO in blocks reports a failed sum over the blocks", "[runtime][reducer]") {
  for (bool zero2 : {false, true}) {
    CAPTURE(zero2);
    auto block = std::make_shared<FailingPeer>();
    auto cross = std::make_shared<FailingCross>();
    std::vector<at::Tensor> ps;
    std::vector<std::string> names;
    for (int k = 0; k < 5; ++k) {
      ps.push_back(at::zeros({4}).requires_grad_(true));
      names.push_back(fmt::format("w{}", k));
    }
    Reducer reducer(block, ps, names, /*bucketBytes=*/16, /*average=*/true,
                    std::chrono::milliseconds(1000), /*divisor=*/0, /*scatter=*/true, zero2, cross);
    REQUIRE(reducer.numBuckets() == 5);
    auto backwardInBucketOrder = [&] {
      reducer.prepare(true);
      for (int k = 4; k >= 0; --k)
        (ps[size_t(k)] * 1.0).sum().backward();
    };
    cross->failAt = 1;
    backwardInBucketOrder();
    // Backward sent the sums of buckets 0-2 (each once 2 more reduce-scatters
    // were under way); ZeRO-2 waited for bucket 0's there.
    CHECK(cross->calls == 3);
    Status st = reducer.finish();
    REQUIRE_FALSE(st.isOk());
    CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring(
                                 "gradient reducer (the sum over the ZeRO blocks) on"));
    CHECK_THAT(st.message(),
               Catch::Matchers::ContainsSubstring("bucket 0 of 5 (first tensor 'w4')"));
    CHECK_THAT(st.message(), Catch::Matchers::ContainsSubstring("the other block is gone"));
    // ZeRO-2 stops sending once it has seen the failure; ZeRO-1 sees it in finish().
    CHECK(cross->calls == (zero2 ? 3 : 5));
    CHECK(block->calls == 5);

    cross->failAt = 0;
    if (zero2)
      reducer.clearGradShards();
    else
      for (auto &p : ps)
        p.mutable_grad().zero_();
    backwardInBucketOrder();
    NNSC_REQUIRE_OK(reducer.finish());
    for (size_t b = 0; b < reducer.numBuckets(); ++b) // this rank's half of ones, / 2 x 2 ranks
      CHECK(at::equal(reducer.gradShard(b), at::full({2}, 0.25)));
  }
}
