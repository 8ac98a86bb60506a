// CommBackend's checks and loud defaults, rendezvous failures, and dead or
// stuck peers: every failure is an error naming the group and operation,
// within the timeout.
#include "CommTestUtil.h" // first: see there

#include <filesystem>
#include <string>
#include <thread>

#include <sched.h>

#include "SpawnWorkers.h"
#include "nnsc/Runtime/Program.h"

using namespace nnsc;
using namespace nnsc::rt;
using Catch::Matchers::ContainsSubstring;

namespace {

// A backend that implements nothing: every operation takes the default.
class NothingBackend : public CommBackend {
public:
  NothingBackend() : CommBackend(GroupInfo{5, {0, 1}, 0, kDefaultCommTimeout}) {}
  std::string name() const override { return "nothing"; }
};

LaunchEnv twoRanks(int rank, int port) {
  LaunchEnv env;
  env.rank = rank;
  env.worldSize = 2;
  env.localRank = rank;
  env.localWorldSize = 2;
  env.masterPort = port;
  return env;
}

// Threads of this process under SCHED_BATCH.
int batchThreads() {
  int n = 0;
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    int policy = sched_getscheduler(std::stoi(entry.path().filename().string()));
    n += policy >= 0 && (policy & ~SCHED_RESET_ON_FORK) == SCHED_BATCH;
  }
  return n;
}

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

} // namespace

TEST_CASE("a backend without an operation says so, naming both") {
  NothingBackend backend;
  at::Tensor x = at::zeros({4});
  at::Tensor y = at::zeros({4});
  Status s = backend.allToAll(x, y)->wait();
  CHECK_THAT(s.message(), ContainsSubstring("backend 'nothing' does not support alltoall"));
  std::vector<at::Tensor> xs{x};
  CHECK_THAT(backend.allReduce(xs)->wait().message(),
             ContainsSubstring("backend 'nothing' does not support allreduce"));
  CHECK_THAT(backend.barrier()->wait().message(), ContainsSubstring("does not support barrier"));
}

TEST_CASE("collective arguments are checked before any communication") {
  NothingBackend backend;
  std::vector<at::Tensor> one{at::zeros({3})};
  Status s = backend.allGather(at::zeros({3}), one)->wait();
  CHECK_THAT(s.message(),
             ContainsSubstring("nothing allgather on group 5 (global ranks 0,1), rank 0"));
  CHECK_THAT(s.message(), ContainsSubstring("expected 2 outputs, got 1"));
  at::Tensor out = at::zeros({3});
  std::vector<at::Tensor> two{at::zeros({3}), at::zeros({4})};
  CHECK_THAT(backend.reduceScatter(two, out)->wait().message(),
             ContainsSubstring("an input has shape [4], expected [3]"));
  at::Tensor odd = at::zeros({3});
  CHECK_THAT(backend.allToAll(odd, odd)->wait().message(),
             ContainsSubstring("does not split into 2 equal parts"));
  CHECK_THAT(backend.send(at::zeros({1}), 0)->wait().message(),
             ContainsSubstring("destination 0 is this rank itself"));
  CHECK_THAT(backend.recv(out, 2)->wait().message(), ContainsSubstring("source 2 is out of range"));
}

TEST_CASE("a flat's split is one buffer to a collective; other parts are not") {
  at::Tensor flat = at::arange(12, at::kFloat);
  std::vector<at::Tensor> parts = flat.split(4);
  at::Tensor whole = backToBack(parts);
  REQUIRE(whole.defined());
  CHECK(whole.data_ptr() == flat.data_ptr());
  CHECK(whole.numel() == 12);
  whole.fill_(7); // the same memory
  CHECK(flat.eq(7).all().item<bool>());
  std::vector<at::Tensor> tail{parts[1], parts[2]};
  CHECK(backToBack(tail).data_ptr() == parts[1].data_ptr());
  std::vector<at::Tensor> gap{parts[0], parts[2]}, swapped{parts[1], parts[0]};
  CHECK_FALSE(backToBack(gap).defined());
  CHECK_FALSE(backToBack(swapped).defined());
  std::vector<at::Tensor> apart{at::zeros({4}), at::zeros({4})};
  CHECK_FALSE(backToBack(apart).defined());
  // Adjacent memory in two storages is refused too (not merely a gap).
  std::vector<float> buffer(8);
  std::vector<at::Tensor> adjacent{at::from_blob(buffer.data(), {4}),
                                   at::from_blob(buffer.data() + 4, {4})};
  REQUIRE(static_cast<char *>(adjacent[1].data_ptr()) ==
          static_cast<char *>(adjacent[0].data_ptr()) + 16);
  CHECK_FALSE(backToBack(adjacent).defined());
  std::vector<at::Tensor> withEmpty{flat.narrow(0, 0, 0), parts[0]};
  CHECK_FALSE(backToBack(withEmpty).defined());
  at::Tensor grid = at::zeros({4, 4});
  std::vector<at::Tensor> columns = grid.split(2, 1); // not contiguous
  CHECK_FALSE(backToBack(columns).defined());
  std::vector<at::Tensor> mixed{flat.narrow(0, 0, 4), flat.narrow(0, 4, 4).view(at::kInt)};
  CHECK_FALSE(backToBack(mixed).defined());
  CHECK_FALSE(backToBack({}).defined());

  CHECK(overlaps(parts[0], flat));
  CHECK_FALSE(overlaps(parts[0], parts[1]));
  CHECK(overlaps(flat.narrow(0, 3, 2), parts[1]));
  CHECK_FALSE(overlaps(flat, at::zeros({12})));
  CHECK(overlaps(columns[0], at::zeros({1}))); // not contiguous: assumed to
}

// Which collectives write the caller's memory directly (no staging buffer):
// NCCL's all-gather and reduce-scatter take these decisions.
TEST_CASE("a collective writes back-to-back pieces directly only where NCCL allows the overlap") {
  at::Tensor flat = at::arange(12, at::kFloat);
  std::vector<at::Tensor> parts = flat.split(4); // 3 ranks' pieces; this is rank 1
  at::Tensor span;
  // All-gather: apart from the outputs, or in place as this rank's piece.
  CHECK(allGatherDirect(at::zeros({4}), parts, 1, span));
  CHECK(span.data_ptr() == flat.data_ptr());
  CHECK(span.numel() == 12);
  CHECK(allGatherDirect(parts[1], parts, 1, span));
  CHECK_FALSE(allGatherDirect(parts[0], parts, 1, span));             // another rank's piece
  CHECK_FALSE(allGatherDirect(flat.narrow(0, 2, 4), parts, 1, span)); // straddles two
  std::vector<at::Tensor> apart{at::zeros({4}), at::zeros({4}), at::zeros({4})};
  CHECK_FALSE(allGatherDirect(at::zeros({4}), apart, 1, span));
  CHECK_FALSE(span.defined());
  // Reduce-scatter of the pieces as they lie: into memory apart from them,
  // or in place into this rank's input.
  at::Tensor sent = backToBack(parts);
  CHECK(reduceScatterDirect(sent, parts, at::zeros({4}), 1));
  CHECK(reduceScatterDirect(sent, parts, parts[1], 1));
  CHECK_FALSE(reduceScatterDirect(sent, parts, parts[0], 1));
  CHECK_FALSE(reduceScatterDirect(sent, parts, flat.narrow(0, 2, 4), 1));
  at::Tensor grid = at::zeros({4, 4});
  CHECK_FALSE(reduceScatterDirect(sent, parts, grid.select(1, 0), 1)); // not contiguous
  // Inputs copied into a stack first: any contiguous output is apart from it.
  at::Tensor stacked = at::stack(apart).contiguous();
  CHECK(reduceScatterDirect(stacked, apart, apart[1], 1));
  CHECK(reduceScatterDirect(stacked, apart, apart[0], 1));
}

TEST_CASE("an unknown backend name lists the known ones") {
  LaunchEnv env;
  CommOptions options;
  options.backend = "mpi";
  auto world = CommWorld::create(env, options);
  REQUIRE_FALSE(world.isOk());
  CHECK_THAT(world.status().message(),
             ContainsSubstring("unknown communication backend 'mpi'; expected one of: gloo, nccl"));
}

TEST_CASE("nccl without a usable GPU or NCCL build is an error, not a crash") {
  CommOptions options;
  options.backend = "nccl";
  options.timeout = std::chrono::milliseconds(5000);
  auto world = CommWorld::create(LaunchEnv{}, options);
  if (world.isOk())
    return; // a machine with a GPU: nothing to check here
  INFO(world.status().message());
  CHECK_THAT(
      world.status().message(),
      ContainsSubstring("backend 'nccl' is not available in this build") ||
          ContainsSubstring("cannot create nccl the world group (1 ranks) at rank 0 on cuda:0"));
}

TEST_CASE("a single-process gloo world runs every collective") {
  auto world = CommWorld::create(LaunchEnv{});
  NNSC_REQUIRE_OK(world.status());
  NNSC_REQUIRE_OK((*world)->addGroups({{4, {0}}, {6, {0}}}));
  test::checkCollectives((*world)->world());
  test::checkCollectives(*(*world)->group(4));
  CHECK(findGroup(6) == (*world)->group(6));
  CHECK((*world)->group(7) == nullptr);
  CHECK_THAT((*world)->addGroups({{8, {1}}}).message(),
             ContainsSubstring("names rank 1, outside a world of 1"));
  world = Status::error("destroyed");
  CHECK(findGroup(kWorldGroup) == nullptr);
}

TEST_CASE("gloo's worker threads run under SCHED_BATCH; the caller and the I/O thread do not") {
  int before = batchThreads();
  {
    CommOptions options; // glooBatchWorkers by default
    auto world = CommWorld::create(LaunchEnv{}, options);
    NNSC_REQUIRE_OK(world.status());
    CHECK(batchThreads() - before == options.glooThreads);
    CHECK(sched_getscheduler(0) == SCHED_OTHER);
    NNSC_REQUIRE_OK((*world)->addGroups({{4, {0}}}));
    CHECK(batchThreads() - before == 2 * options.glooThreads);
    CHECK(sched_getscheduler(0) == SCHED_OTHER);
    test::checkCollectives((*world)->world());
  }
  // The workers stop with their groups (a joined thread may linger in /proc a moment).
  auto start = Clock::now();
  while (batchThreads() != before && secondsSince(start) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(batchThreads() == before);
  CommOptions normal;
  normal.glooBatchWorkers = false;
  auto world = CommWorld::create(LaunchEnv{}, normal);
  NNSC_REQUIRE_OK(world.status());
  CHECK(batchThreads() == before);
}

TEST_CASE("a rank that never arrives fails the rendezvous within the timeout") {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  auto start = Clock::now();
  auto world = CommWorld::create(twoRanks(0, test::freePort()), options);
  REQUIRE_FALSE(world.isOk());
  CHECK_THAT(world.status().message(),
             ContainsSubstring("cannot create the gloo context of the world group (2 ranks)"));
  // Gloo's "Socket Timeout" while connecting, explained as a timeout.
  CHECK_THAT(world.status().message(), ContainsSubstring("timed out after 2000 ms"));
  CHECK(secondsSince(start) < 30);
}

TEST_CASE("a rank that cannot reach the store says where it looked") {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(1500);
  int port = test::freePort();
  auto world = CommWorld::create(twoRanks(1, port), options);
  REQUIRE_FALSE(world.isOk());
  CHECK_THAT(world.status().message(),
             ContainsSubstring("rank 1 cannot reach the rendezvous store at 127.0.0.1:" +
                               std::to_string(port)));
}

// Rank 1 leaves (NNSC_TEST_PEER=exit) or stalls (stall: it waits in the
// store until rank 0 is done) after the first barrier; rank 0 must get errors
// naming the op, through a program and directly, within the 3 s timeout.
TEST_CASE("comm worker: a peer fails", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = test::joinWorld();
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
  std::string peer = std::getenv("NNSC_TEST_PEER");
  if (world->rank() == 1) {
    if (peer == "stall") // until rank 0 is done (or gone: it hosts the store)
      try {
        world->store()->wait({"test/done"}, std::chrono::seconds(30));
      } catch (const std::exception &) {
      }
    return;
  }
  auto program =
      Program::compile("def f(x: Tensor):\n    return nnsc.all_reduce(x, group=-1)\n", "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  auto out = program->run({at::ones({4})});
  REQUIRE_FALSE(out.isOk());
  std::string message = out.status().message();
  INFO(message);
  CHECK_THAT(message, ContainsSubstring("rank0.py:2: error: in f: nnsc.all_reduce(group=-1): gloo "
                                        "allreduce on the world group (2 ranks), rank 0"));
  CHECK_THAT(message,
             ContainsSubstring(peer == "stall" ? "timed out after 3000 ms" : "did it exit?"));
  std::vector<at::Tensor> xs{at::ones({4})};
  Status direct = world->world().allReduce(xs)->wait();
  CHECK_THAT(direct.message(),
             ContainsSubstring("gloo allreduce on the world group (2 ranks), rank 0"));
  world->store()->set("test/done", std::vector<uint8_t>{1});
}

TEST_CASE("a dead or stalled peer gives an error naming the operation, not a hang") {
  std::string peer = GENERATE("exit", "stall");
  int port = test::freePort();
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 2; ++r) {
    env.push_back(test::torchrunEnv(r, 2, port, /*agentStore=*/false));
    env.back()["NNSC_TEST_TIMEOUT_MS"] = "3000";
    env.back()["NNSC_TEST_PEER"] = peer;
  }
  auto results = test::runWorkers("comm worker: a peer fails", env, std::chrono::seconds(90));
  for (const auto &result : results) {
    INFO("peer " << peer << ":\n" << result.log);
    CHECK(result.status == 0);
  }
}
