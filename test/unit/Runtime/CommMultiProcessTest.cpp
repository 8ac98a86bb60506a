// Multi-process tests of the Gloo backend and the nnsc.* ops: the test
// binary re-runs itself as 2 or 3 workers on 127.0.0.1 (SpawnWorkers.h); each
// worker checks every collective and every op's backward against values it
// computes by hand from what each rank contributes.
#include "CommTestUtil.h" // first: see there

#include "SpawnWorkers.h"
#include "nnsc/Runtime/Program.h"
#include "nnsc/Torch/Compat.h"

using namespace nnsc;
using namespace nnsc::rt;
using nnsc::test::runWorkers;
using nnsc::test::torchrunEnv;

namespace {

// Differentiable checks of every op on group 1 (all ranks). Inputs are
// valueOf(r, in), the loss is sum(y * weightOf(r, out)).
const char *kOpsProgram = R"(
def all_reduce(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.all_reduce(x, group=1)
    return y, (y * c).sum()
def identity_all_reduce(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.identity_all_reduce(x, group=1)
    return y, (y * c).sum()
def all_gather(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.all_gather(x, dim=1, group=1)
    return y, (y * c).sum()
def reduce_scatter(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.reduce_scatter(x, dim=0, group=1)
    return y, (y * c).sum()
def all_to_all(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.all_to_all(x, split_dim=0, concat_dim=1, group=1)
    return y, (y * c).sum()
def split(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.split(x, dim=-1, group=1)
    return y, (y * c).sum()
def value_split(x: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    y = nnsc.value_split(x, group=1)
    return y, (y * c).sum()
)";

using Shape = std::vector<int64_t>;
using Expect = std::function<at::Tensor(int n, int r)>;

struct OpCase {
  std::string fn;
  std::function<Shape(int n)> in, out;
  Expect y, grad; // forward value and gradient of x on rank r of n
};

at::Tensor catOver(int n, const std::function<at::Tensor(int)> &part, int64_t dim) {
  std::vector<at::Tensor> parts;
  for (int k = 0; k < n; ++k)
    parts.push_back(part(k));
  return at::cat(parts, dim);
}

at::Tensor sumOver(int n, const std::function<at::Tensor(int)> &part) {
  at::Tensor s = part(0);
  for (int k = 1; k < n; ++k)
    s = s + part(k);
  return s;
}

std::vector<OpCase> opCases() {
  auto small = [](int) { return Shape{2, 3}; };
  auto wide = [](int n) { return Shape{2, 3 * n}; };
  auto tall = [](int n) { return Shape{2 * n, 3}; };
  using test::valueOf;
  using test::weightOf;
  return {
      {"all_reduce", small, small,
       [](int n, int) { return sumOver(n, [](int k) {
                          return valueOf(k, {2, 3});
                        }); },
       [](int, int r) {
         return weightOf(r, {2, 3});
       }},
      {"identity_all_reduce", small, small,
       [](int, int r) {
         return valueOf(r, {2, 3});
       },
       [](int n, int) { return sumOver(n, [](int k) {
                          return weightOf(k, {2, 3});
                        }); }},
      {"all_gather", small, wide,
       [](int n, int) {
         return catOver(
             n,
             [](int k) {
               return valueOf(k, {2, 3});
             },
             1);
       },
       [](int n, int r) {
         return sumOver(n, [&](int k) { return weightOf(k, {2, 3 * n}).narrow(1, 3 * r, 3); });
       }},
      {"reduce_scatter", tall, small,
       [](int n, int r) {
         return sumOver(n, [&](int k) { return valueOf(k, {2 * n, 3}).narrow(0, 2 * r, 2); });
       },
       [](int n, int) {
         return catOver(
             n,
             [](int k) {
               return weightOf(k, {2, 3});
             },
             0);
       }},
      {"all_to_all", tall, wide,
       [](int n, int r) {
         return catOver(
             n,
             [&](int i) {
               return valueOf(i, {2 * n, 3}).narrow(0, 2 * r, 2);
             },
             1);
       },
       [](int n, int r) {
         return catOver(
             n,
             [&](int j) {
               return weightOf(j, {2, 3 * n}).narrow(1, 3 * r, 3);
             },
             0);
       }},
      {"split", wide, small,
       [](int n, int r) {
         return valueOf(r, {2, 3 * n}).narrow(1, 3 * r, 3);
       },
       [](int n, int) {
         return catOver(
             n,
             [](int k) {
               return weightOf(k, {2, 3});
             },
             1);
       }},
      // Rank 0 keeps the value, the others hold zeros; each gets its own
      // gradient back (whole: the partial sums' gradients are).
      {"value_split", small, small,
       [](int, int r) {
         return r == 0 ? valueOf(r, {2, 3}) : at::zeros({2, 3}, at::kDouble);
       },
       [](int, int r) {
         return weightOf(r, {2, 3});
       }},
  };
}

void checkOps(int n, int r) {
  auto program = Program::compile(kOpsProgram, "ops.py");
  NNSC_REQUIRE_OK(program.status());
  for (const OpCase &c : opCases()) {
    INFO("nnsc." << c.fn << " on rank " << r << " of " << n);
    at::Tensor x = test::valueOf(r, c.in(n)).requires_grad_();
    auto out = program->run(c.fn, {x, test::weightOf(r, c.out(n))});
    NNSC_REQUIRE_OK(out.status());
    (*out)[1].backward();
    CHECK(at::allclose((*out)[0], c.y(n, r)));
    REQUIRE(x.grad().defined());
    CHECK(at::allclose(x.grad(), c.grad(n, r)));
  }
}

// The same value with transposed strides (a 2-d tensor that is not contiguous).
at::Tensor transposedCopy(const at::Tensor &t) { return t.t().contiguous().t(); }

// Every nnsc.* op with inputs and gradients of any strides: a transposed input
// and weight, a zero-stride (expanded) input, and the zero-stride gradient
// that sum() sends back. Each must give what the contiguous run gives.
void checkStrides(int n, int r) {
  auto program = Program::compile(kOpsProgram, "ops.py");
  NNSC_REQUIRE_OK(program.status());
  for (const OpCase &c : opCases()) {
    INFO("nnsc." << c.fn << " on rank " << r << " of " << n << " with any strides");
    auto run = [&](const at::Tensor &input, const at::Tensor &weight, bool sumOnly) {
      at::Tensor x = input.detach().requires_grad_();
      auto out = program->run(c.fn, {x, weight});
      NNSC_REQUIRE_OK(out.status());
      ((sumOnly ? (*out)[0].sum() : (*out)[1])).backward();
      REQUIRE(x.grad().defined());
      return std::make_pair((*out)[0].detach(), x.grad());
    };
    at::Tensor value = test::valueOf(r, c.in(n)), weight = test::weightOf(r, c.out(n));
    auto want = run(value, weight, false);
    auto got = run(transposedCopy(value), transposedCopy(weight), false);
    CHECK(at::equal(got.first, want.first));
    CHECK(at::equal(got.second, want.second));
    at::Tensor ones = at::ones(c.in(n), at::kDouble);
    auto wantOnes = run(ones, weight, true);
    auto gotOnes = run(at::ones({1, 1}, at::kDouble).expand(c.in(n)), weight, true);
    CHECK(at::equal(gotOnes.first, wantOnes.first));
    CHECK(at::equal(gotOnes.second, wantOnes.second));
    // 4-d tensors in channels-last order (what convolutions and permutes of
    // image-like activations hand over), forward and backward. (split cuts
    // the last dim, which the two extra dims would change.)
    if (c.fn == "split")
      continue;
    Shape in4 = c.in(n), out4 = c.out(n);
    in4.insert(in4.end(), {2, 2});
    out4.insert(out4.end(), {2, 2});
    at::Tensor value4 = test::valueOf(r, in4), weight4 = test::weightOf(r, out4);
    auto want4 = run(value4, weight4, false);
    auto got4 = run(value4.contiguous(at::MemoryFormat::ChannelsLast),
                    weight4.contiguous(at::MemoryFormat::ChannelsLast), false);
    CHECK(at::equal(got4.first, want4.first));
    CHECK(at::equal(got4.second, want4.second));
  }
}

std::vector<GroupSpec> testGroups(int n) {
  std::vector<GroupSpec> groups{{1, {}}, {2, {0, n - 1}}};
  for (int k = 0; k < n; ++k) {
    groups[0].ranks.push_back(k);
    groups.push_back(GroupSpec{10 + k, {k}});
  }
  return groups;
}

} // namespace

TEST_CASE("comm worker: collectives", "[.worker]") {
  if (!test::isWorker())
    return;
  std::unique_ptr<CommWorld> world = test::joinWorld();
  int n = world->size(), r = world->rank();
  NNSC_REQUIRE_OK(world->addGroups(testGroups(n)));
  CHECK((world->group(2) != nullptr) == (r == 0 || r == n - 1));
  test::checkCollectives(world->world());
  test::checkCollectives(*world->group(1));
  if (r == 0 || r == n - 1)
    test::checkCollectives(*world->group(2));
  checkOps(n, r);
  checkStrides(n, r);
  NNSC_REQUIRE_OK(world->world().barrier()->wait());
}

TEST_CASE("collectives and nnsc ops on 2 ranks, store hosted by the launcher") {
  // Like torchrun's agent: this process hosts the store, workers connect
  // (libuv's store where this LibTorch has it, the classic one otherwise).
  c10d::TCPStoreOptions opts = torchcompat::tcpStoreOptions();
  opts.port = 0;
  opts.isServer = true;
  opts.waitWorkers = false;
  c10d::TCPStore store("127.0.0.1", opts);
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 2; ++r)
    env.push_back(torchrunEnv(r, 2, store.getPort(), /*agentStore=*/true));
  auto results = runWorkers("comm worker: collectives", env, std::chrono::seconds(240));
  for (const auto &result : results) {
    INFO(result.log);
    CHECK(result.status == 0);
  }
}

TEST_CASE("collectives and nnsc ops on 3 ranks, store hosted by rank 0") {
  int port = test::freePort();
  std::vector<std::map<std::string, std::string>> env;
  for (int r = 0; r < 3; ++r)
    env.push_back(torchrunEnv(r, 3, port, /*agentStore=*/false));
  auto results = runWorkers("comm worker: collectives", env, std::chrono::seconds(240));
  for (const auto &result : results) {
    INFO(result.log);
    CHECK(result.status == 0);
  }
}
