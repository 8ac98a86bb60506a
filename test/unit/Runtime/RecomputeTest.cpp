// nnsc.recompute (Recompute.h): a group function run without its
// activations gives the gradients of the plain program, draws the same
// dropout masks when it runs again, and keeps less memory after forward.
#include "CommTestUtil.h" // first: see there

#include <ATen/ATen.h>

#include "nnsc/Runtime/AllocationCounter.h"
#include "nnsc/Runtime/Program.h"
#include "nnsc/Runtime/RngStreams.h"

using namespace nnsc;
using namespace nnsc::rt;

namespace {

// Three dropout-tanh-linear layers, written as codegen writes them: once
// through nnsc.recompute, once inline. A split random op (rng_fork) inside
// the group draws from a stream seeded by the forward index.
const char *kProgram = R"(
def forward(w1: Tensor, w2: Tensor, w3: Tensor, x: Tensor, device: Device) -> Tuple[Tensor]:
    t0 = torch.mul(x, 2.0)
    rc0 = nnsc.recompute("recompute_0", [t0, w1, w2, w3], device)
    t9 = rc0[0]
    t10 = torch.sum(t9)
    return (t10,)

def recompute_0(t0: Tensor, w1: Tensor, w2: Tensor, w3: Tensor, device: Device) -> List[Tensor]:
    t1 = torch.linear(t0, w1, bias=None)
    t2 = torch.tanh(t1)
    t3 = torch.dropout(t2, p=0.3, train=True)
    t4 = torch.linear(t3, w2, bias=None)
    t5 = torch.tanh(t4)
    nnsc.rng_fork(node=6, piece=1)
    t6 = torch.dropout(t5, p=0.3, train=True)
    nnsc.rng_join()
    t7 = torch.linear(t6, w3, bias=None)
    t8 = torch.tanh(t7)
    t9 = torch.dropout(t8, p=0.3, train=True)
    return [t9]

def plain(w1: Tensor, w2: Tensor, w3: Tensor, x: Tensor, device: Device) -> Tuple[Tensor]:
    t0 = torch.mul(x, 2.0)
    t1 = torch.linear(t0, w1, bias=None)
    t2 = torch.tanh(t1)
    t3 = torch.dropout(t2, p=0.3, train=True)
    t4 = torch.linear(t3, w2, bias=None)
    t5 = torch.tanh(t4)
    nnsc.rng_fork(node=6, piece=1)
    t6 = torch.dropout(t5, p=0.3, train=True)
    nnsc.rng_join()
    t7 = torch.linear(t6, w3, bias=None)
    t8 = torch.tanh(t7)
    t9 = torch.dropout(t8, p=0.3, train=True)
    t10 = torch.sum(t9)
    return (t10,)
)";

struct Model {
  std::vector<at::Tensor> weights;
  at::Tensor x;
};

Model makeModel(int64_t rows, int64_t width) {
  at::manual_seed(5);
  Model m;
  for (int i = 0; i < 3; ++i)
    m.weights.push_back((at::randn({width, width}) / 8).requires_grad_(true));
  m.x = at::randn({rows, width}).requires_grad_(true);
  return m;
}

std::vector<c10::IValue> argsOf(const Model &m) {
  std::vector<c10::IValue> args(m.weights.begin(), m.weights.end());
  args.emplace_back(m.x);
  args.emplace_back(c10::Device(c10::kCPU));
  return args;
}

struct Result {
  at::Tensor loss;
  std::vector<at::Tensor> grads; // w1, w2, w3, x
  at::Tensor after;              // the shared stream's next values after backward
};

// Seeds the streams, runs `function` forward and backward.
Result train(const Program &program, const std::string &function, const Model &m) {
  setRngStreams(7, 0, "cpu");
  setRngForward(4);
  at::manual_seed(123);
  auto out = program.run(function, argsOf(m));
  NNSC_REQUIRE_OK(out.status());
  at::Tensor loss = (*out)[0];
  setRngForward(5); // a later forward's index must not leak into the re-run
  loss.backward();
  Result r{loss.detach(), {}, at::rand({8})};
  for (const at::Tensor &w : m.weights) {
    r.grads.push_back(w.grad().clone());
    const_cast<at::Tensor &>(w).mutable_grad().reset();
  }
  r.grads.push_back(m.x.grad().clone());
  const_cast<at::Tensor &>(m.x).mutable_grad().reset();
  return r;
}

} // namespace

TEST_CASE("nnsc.recompute: the gradients of the inline program, dropout masks drawn again") {
  auto program = Program::compile(kProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  Model m = makeModel(16, 32);
  Result plain = train(*program, "plain", m);
  Result recomputed = train(*program, "forward", m);
  CHECK(at::equal(plain.loss, recomputed.loss));
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    INFO("gradient " << i);
    CHECK(at::equal(plain.grads[i], recomputed.grads[i]));
  }
  // The re-run in backward leaves the shared stream where it was.
  CHECK(at::equal(plain.after, recomputed.after));
}

TEST_CASE("nnsc.recompute: without the restored random state the masks would differ") {
  // The guard of the test above: a second forward of the plain program
  // under another seed gives other gradients, so equal ones mean equal masks.
  auto program = Program::compile(kProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  Model m = makeModel(16, 32);
  Result a = train(*program, "plain", m);
  setRngStreams(8, 0, "cpu");
  at::manual_seed(124);
  auto out = program->run("plain", argsOf(m));
  NNSC_REQUIRE_OK(out.status());
  (*out)[0].backward();
  CHECK_FALSE(at::equal(a.grads[0], m.weights[0].grad()));
}

TEST_CASE("nnsc.recompute: under no-grad it just runs the group") {
  auto program = Program::compile(kProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  Model m = makeModel(4, 8);
  at::NoGradGuard noGrad;
  setRngStreams(7, 0, "cpu");
  at::manual_seed(1);
  auto a = program->run("forward", argsOf(m));
  at::manual_seed(1);
  auto b = program->run("plain", argsOf(m));
  NNSC_REQUIRE_OK(a.status());
  NNSC_REQUIRE_OK(b.status());
  CHECK(at::equal((*a)[0], (*b)[0]));
  CHECK_FALSE((*a)[0].requires_grad());
}

TEST_CASE("nnsc.recompute: after forward only the group's inputs are kept") {
  installCpuAllocationCounter();
  auto program = Program::compile(kProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  Model m = makeModel(256, 64); // 64 KiB per activation
  auto activations = [&](const std::string &function) {
    setRngStreams(7, 0, "cpu");
    at::manual_seed(3);
    int64_t before = cpuLiveBytes();
    auto out = program->run(function, argsOf(m));
    NNSC_REQUIRE_OK(out.status());
    int64_t kept = cpuLiveBytes() - before;
    (*out)[0].backward();
    return kept;
  };
  int64_t plain = activations("plain");
  int64_t recomputed = activations("forward");
  INFO("activation bytes after forward: plain " << plain << ", recomputed " << recomputed);
  // Plain keeps t0 and each layer's input, tanh output and dropout mask;
  // recompute keeps t0 and the group's output (the loss's sum needs no more).
  int64_t one = 256 * 64 * 4;
  CHECK(recomputed <= 2 * one + 1024);
  CHECK(plain >= 3 * recomputed);
}
