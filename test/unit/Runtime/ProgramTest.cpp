// Program: compiling rank programs, running them, and backward through the
// nnsc ops' custom autograd kernels on a real single-process Gloo world.
#include "CommTestUtil.h" // first: see there

#include <fstream>

#include "nnsc/Runtime/Program.h"
#include "nnsc/Torch/Compat.h"

using namespace nnsc;
using namespace nnsc::rt;
using Catch::Matchers::ContainsSubstring;

namespace {

const char *kLinearProgram = R"(
def step(x: Tensor, w: torch.Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
    y = torch.linear(x, w, b)
    z = nnsc.all_reduce(y, group=3)
    z = nnsc.identity_all_reduce(torch.tanh(z), group=3)
    return (z * z).sum() * math.pi, z
)";

// loss(w) with the program, for finite differences.
double lossAt(const Program &program, const at::Tensor &x, const at::Tensor &w,
              const at::Tensor &b) {
  auto out = program.run({x, w, b});
  REQUIRE(out.isOk());
  return (*out)[0].item<double>();
}

} // namespace

TEST_CASE("a program with torch and nnsc ops runs and differentiates through nnsc.all_reduce") {
  auto world = CommWorld::create(LaunchEnv{});
  NNSC_REQUIRE_OK(world.status());
  NNSC_REQUIRE_OK((*world)->addGroups({{3, {0}}}));
  auto program = Program::compile(kLinearProgram, "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  CHECK(program->functions() == std::vector<std::string>({"step"}));

  at::Tensor x = test::valueOf(0, {2, 3}) * 0.01;
  at::Tensor w = (test::weightOf(1, {4, 3}) * 0.01).requires_grad_();
  at::Tensor b = at::linspace(-1, 1, 4, at::kDouble).requires_grad_();
  auto out = program->run({x, w, b});
  NNSC_REQUIRE_OK(out.status());
  REQUIRE(out->size() == 2);
  at::Tensor z = (*out)[1];
  // The graph goes through the ops' own autograd nodes.
  REQUIRE(z.grad_fn());
  CHECK_THAT(z.grad_fn()->name(), ContainsSubstring("IdentityAllReduceFn"));
  CHECK_THAT(z.grad_fn()->next_edges()[0].function->name(), ContainsSubstring("Tanh"));
  (*out)[0].backward();
  REQUIRE(w.grad().defined());

  // Central differences in double precision agree with the gradients.
  torch::NoGradGuard noGrad;
  const double eps = 1e-6;
  for (int64_t i = 0; i < w.numel(); ++i) {
    at::Tensor wp = w.detach().clone(), wm = w.detach().clone();
    wp.view(-1)[i] += eps;
    wm.view(-1)[i] -= eps;
    double numeric = (lossAt(*program, x, wp, b) - lossAt(*program, x, wm, b)) / (2 * eps);
    CHECK(w.grad().view(-1)[i].item<double>() == Approx(numeric).epsilon(1e-5));
  }
  for (int64_t i = 0; i < b.numel(); ++i) {
    at::Tensor bp = b.detach().clone(), bm = b.detach().clone();
    bp[i] += eps;
    bm[i] -= eps;
    double numeric = (lossAt(*program, x, w, bp) - lossAt(*program, x, w, bm)) / (2 * eps);
    CHECK(b.grad()[i].item<double>() == Approx(numeric).epsilon(1e-5));
  }
}

TEST_CASE("compile errors name the file and line") {
  auto program =
      Program::compile("def f(x: Tensor):\n    y = x + 1\n    return foo(y)\n", "rank1.py");
  REQUIRE_FALSE(program.isOk());
  CHECK_THAT(program.status().message(),
             ContainsSubstring("rank1.py:3: error: undefined value foo"));
  CHECK_THAT(program.status().message(), ContainsSubstring("return foo(y)"));

  auto syntax = Program::compile("def f(x: Tensor):\n    return x +\n", "rank2.py");
  REQUIRE_FALSE(syntax.isOk());
  CHECK_THAT(syntax.status().message(), ContainsSubstring("rank2.py:"));
  CHECK_THAT(syntax.status().message(), ContainsSubstring("error: expected"));

  auto empty = Program::compile("# nothing\n", "rank3.py");
  REQUIRE_FALSE(empty.isOk());
  CHECK(empty.status().message() == "rank3.py: error: the program defines no function");
}

TEST_CASE("run errors name the line, the function and the cause") {
  auto program = Program::compile(
      "def f(x: Tensor, w: Tensor):\n    y = torch.linear(x, w)\n    return nnsc.all_reduce(y, "
      "group=9)\n",
      "rank0.py");
  NNSC_REQUIRE_OK(program.status());
  auto bad = program->run({at::ones({2, 5}), at::ones({4, 3})});
  REQUIRE_FALSE(bad.isOk());
  CHECK_THAT(bad.status().message(),
             ContainsSubstring("rank0.py:2: error: in f: mat1 and mat2 shapes"));
  auto noGroup = program->run({at::ones({2, 3}), at::ones({4, 3})});
  REQUIRE_FALSE(noGroup.isOk());
  CHECK_THAT(
      noGroup.status().message(),
      ContainsSubstring("rank0.py:3: error: in f: nnsc.all_reduce: this rank has no communication "
                        "group 9"));
  CHECK_THAT(noGroup.status().message(), !ContainsSubstring("Exception raised from"));
}

TEST_CASE("several functions, entries, argument names and flattened results") {
  auto program = Program::compile(R"(
def first(a: Tensor, n: int) -> Tuple[Tensor, Tuple[Tensor, Optional[Tensor]], int]:
    return a * n, (a + 1, None), n
def second(a: Tensor) -> List[Tensor]:
    return [a, a]
)",
                                  "prog.py");
  NNSC_REQUIRE_OK(program.status());
  CHECK(program->functions() == std::vector<std::string>({"first", "second"}));
  CHECK_THAT(program->run({at::ones({1})}).status().message(),
             ContainsSubstring("choose the entry"));
  CHECK_THAT(program->setEntry("third").message(),
             ContainsSubstring("no function 'third' in the program (defined: first, second)"));
  NNSC_REQUIRE_OK(program->setEntry("first"));
  auto names = program->argumentNames("first");
  REQUIRE(names.isOk());
  CHECK(*names == std::vector<std::string>({"a", "n"}));
  auto out = program->run({at::ones({2}), int64_t(3)});
  NNSC_REQUIRE_OK(out.status());
  REQUIRE(out->size() == 4);
  CHECK(at::equal((*out)[0], at::full({2}, 3.0)));
  CHECK(at::equal((*out)[1], at::full({2}, 2.0)));
  CHECK_FALSE((*out)[2].defined());
  CHECK((*out)[3].item<int64_t>() == 3);
  CHECK(program->run("second", {at::ones({2})})->size() == 2);
}

TEST_CASE("loading a program from a file") {
  std::string path = "/tmp/nnsc-program-test.py";
  std::ofstream(path) << "def f(x: Tensor):\n    return x * 2\n";
  auto program = Program::load(path);
  NNSC_REQUIRE_OK(program.status());
  CHECK(at::equal((*program->run({at::ones({1})}))[0], at::full({1}, 2.0)));
  std::remove(path.c_str());
  CHECK_THAT(Program::load("/nonexistent/rank0.py").status().message(),
             ContainsSubstring("/nonexistent/rank0.py: error: cannot read the program"));
}

TEST_CASE("torch dtypes, math constants and torch.ops namespaces resolve as in Python") {
  auto program = Program::compile(R"(
def f(x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    y = torch.zeros([2], dtype=torch.float64) + math.pi
    z = x.to(torch.int64).contiguous(memory_format=torch.contiguous_format)
    return y, z, torch.ops.nnsc.all_reduce(x, -1) * math.sqrt(4.0)
)",
                                  "prog.py");
  NNSC_REQUIRE_OK(program.status());
  auto world = CommWorld::create(LaunchEnv{});
  NNSC_REQUIRE_OK(world.status());
  auto out = program->run({at::full({2}, 1.5)});
  NNSC_REQUIRE_OK(out.status());
  CHECK((*out)[0].scalar_type() == at::kDouble);
  CHECK((*out)[0][0].item<double>() == Approx(M_PI));
  CHECK((*out)[1].scalar_type() == at::kLong);
  CHECK(at::equal((*out)[2], at::full({2}, 3.0)));
}

TEST_CASE("any registered operator namespace resolves, unknown names stay errors") {
  auto program = Program::compile("def f(x: Tensor):\n    return aten.relu(x)\n", "ns.py");
  NNSC_REQUIRE_OK(program.status());
  CHECK(at::equal((*program->run({at::full({1}, -2.0)}))[0], at::zeros({1})));
  auto unknown = Program::compile("def f(x: Tensor):\n    return nosuchns.relu(x)\n", "ns.py");
  CHECK_THAT(unknown.status().message(),
             ContainsSubstring("ns.py:2: error: undefined value nosuchns"));
}

// Validation runs a program traced in train mode as model.eval() would.
TEST_CASE("Eval mode: dropout passes through, batch_norm uses its running statistics, no "
          "buffer writes, in called functions too") {
  auto program = Program::compile(R"(
def inner(x: Tensor) -> Tensor:
    return torch.feature_dropout(x, 0.5, True)

def step(x: Tensor, w: Tensor, b: Tensor, mean: Tensor, var: Tensor, count: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    y = torch.dropout(x, 0.5, True)
    z = torch.batch_norm(y, w, b, mean, var, True, 0.1, 1e-05, False)
    count.copy_(torch.add(count, 1))
    return z, inner(x), torch.native_dropout(x, 0.5, True)[0]
)",
                                  "rank0.py");
  REQUIRE(program.isOk());
  REQUIRE(program->setEntry("step").isOk());
  at::manual_seed(0);
  at::Tensor x = at::rand({64, 4}) + 1;
  at::Tensor w = at::ones({4}), b = at::zeros({4});
  at::Tensor mean = at::full({4}, 0.5), var = at::full({4}, 4.0);
  at::Tensor count = at::zeros({}, at::kLong);
  auto args = [&] { return std::vector<c10::IValue>{x, w, b, mean, var, count}; };

  auto eval = program->run(args(), Program::Mode::Eval);
  REQUIRE(eval.isOk());
  // (x - running mean) / sqrt(running var + eps): no dropout, no batch statistics.
  CHECK(at::allclose((*eval)[0], (x - 0.5) / std::sqrt(4.0 + 1e-5)));
  CHECK(at::equal((*eval)[1], x));
  CHECK(at::equal((*eval)[2], x));
  CHECK(at::equal(mean, at::full({4}, 0.5)));
  CHECK(at::equal(var, at::full({4}, 4.0)));
  CHECK(count.item<int64_t>() == 0);

  auto train = program->run(args());
  REQUIRE(train.isOk());
  CHECK_FALSE(at::equal((*train)[1], x)); // dropout zeroed and scaled
  CHECK_FALSE(at::equal((*train)[2], x));
  CHECK_FALSE(at::equal(mean, at::full({4}, 0.5))); // running statistics updated
  CHECK(count.item<int64_t>() == 1);
  // The eval form is made once and stays: Eval again after Train.
  auto again = program->run(args(), Program::Mode::Eval);
  REQUIRE(again.isOk());
  CHECK(at::equal((*again)[1], x));
  CHECK(count.item<int64_t>() == 1);
}

// rrelu draws its negative slopes in training; in eval it uses their mean.
TEST_CASE("Eval mode: rrelu uses the mean of its slopes") {
  auto program = Program::compile(R"(
def step(x: Tensor) -> Tensor:
    return torch.rrelu(x, 0.125, 0.375, True)
)",
                                  "rank0.py");
  REQUIRE(program.isOk());
  REQUIRE(program->setEntry("step").isOk());
  at::Tensor x = -at::ones({256});
  auto eval = program->run({x}, Program::Mode::Eval);
  REQUIRE(eval.isOk());
  CHECK(at::equal((*eval)[0], at::full({256}, -0.25)));
  auto train = program->run({x});
  REQUIRE(train.isOk());
  CHECK_FALSE(at::equal((*train)[0], at::full({256}, -0.25))); // drawn slopes
}

#if NNSC_TORCH_AT_LEAST(2, 0)
// nanoGPT's attention passes `dropout if self.training else 0.0` to
// scaled_dot_product_attention: a train-mode trace holds the probability there.
TEST_CASE("Eval mode: scaled_dot_product_attention's dropout probability is 0") {
  auto program = Program::compile(R"(
def step(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    return torch.scaled_dot_product_attention(q, k, v, None, 0.5, True)
)",
                                  "rank0.py");
  REQUIRE(program.isOk());
  REQUIRE(program->setEntry("step").isOk());
  at::manual_seed(0);
  at::Tensor q = at::randn({2, 3, 8, 4}), k = at::randn({2, 3, 8, 4}), v = at::randn({2, 3, 8, 4});
  at::Tensor expected = at::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
  auto eval = program->run({q, k, v}, Program::Mode::Eval);
  REQUIRE(eval.isOk());
  CHECK(at::allclose((*eval)[0], expected));
  auto train = program->run({q, k, v});
  REQUIRE(train.isOk());
  CHECK_FALSE(at::allclose((*train)[0], expected)); // half the attention weights dropped
}
#endif

TEST_CASE("computeLossesInFloat32: loss operators (and a log_softmax feeding only losses) take "
          "float32 inputs, gradients flow back in bf16") {
  auto program = Program::compile(R"(
def loss_of(h: Tensor, y: Tensor) -> Tensor:
    return torch.cross_entropy_loss(h, y, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0)

def step(x: Tensor, w: Tensor, y: Tensor, t: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    h = torch.linear(x, w)
    a = loss_of(h, y)
    b = torch.nll_loss(torch.log_softmax(h, 1), y)
    s = torch.log_softmax(h, 1)
    c = torch.nll_loss(s, y)
    d = torch.mse_loss(h, t)
    return a, b, c, d, s * 2.0
)",
                                  "rank0.py");
  REQUIRE(program.isOk());
  REQUIRE(program->setEntry("step").isOk());
  // cross_entropy, both nll_loss, mse_loss and the first log_softmax; not the
  // second, whose output also feeds `s * 2.0`.
  CHECK(program->computeLossesInFloat32() == 5);
  CHECK(program->computeLossesInFloat32() == 0); // already rewritten

  at::manual_seed(0);
  at::Tensor x = at::randn({8, 6}).to(at::kBFloat16).requires_grad_(true);
  at::Tensor w = at::randn({5, 6}).to(at::kBFloat16);
  at::Tensor y = at::randint(0, 5, {8});
  at::Tensor t = at::randn({8, 5}).to(at::kBFloat16);
  auto out = program->run({x, w, y, t});
  REQUIRE(out.isOk());
  const std::vector<at::Tensor> &o = *out;
  for (size_t i = 0; i < 4; ++i)
    CHECK(o[i].scalar_type() == at::kFloat);
  CHECK(o[4].scalar_type() == at::kBFloat16);

  at::Tensor x2 = x.detach().clone().requires_grad_(true);
  at::Tensor h = at::linear(x2, w);
  at::Tensor hf = h.to(at::kFloat);
  at::Tensor a = at::cross_entropy_loss(hf, y);
  CHECK(at::equal(o[0], a));
  CHECK(at::equal(o[1], at::nll_loss(at::log_softmax(hf, 1), y)));
  CHECK(at::equal(o[2], at::nll_loss(at::log_softmax(h, 1).to(at::kFloat), y)));
  CHECK(at::equal(o[3], at::mse_loss(hf, t.to(at::kFloat))));

  o[0].backward();
  a.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().scalar_type() == at::kBFloat16);
  CHECK(at::equal(x.grad(), x2.grad()));
}

// precision.recipe autocast on float32 weights: the linear computes in bf16,
// the layer_norm and softmax after it in float32, the GELU in what it is given,
// the residual sum in float32 (bf16 + float32 promotes), as torch.autocast.
TEST_CASE("computeAutocastFloat32Ops with computeMatmulsIn: torch.autocast's casts") {
  const char *source = R"(
def step(x: Tensor, w: Tensor, g: Tensor, b: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    h = torch.gelu(torch.linear(x, w))
    n = torch.layer_norm(x + h, [8], g, b, 1e-05, True)
    return h, n, torch.softmax(torch.linear(n, w), -1)
)";
  auto program = Program::compile(source, "rank0.py");
  REQUIRE(program.isOk());
  REQUIRE(program->setEntry("step").isOk());
  CHECK(program->computeMatmulsIn(at::kBFloat16) == 2);
  CHECK(program->computeAutocastFloat32Ops() == 2); // the layer_norm and the softmax
  at::manual_seed(0);
  at::Tensor x = at::randn({4, 8}), w = at::randn({8, 8}).requires_grad_(true);
  at::Tensor g = at::randn({8}), b = at::randn({8});
  auto out = program->run({x, w, g, b});
  INFO(out.status().message());
  REQUIRE(out.isOk());
  CHECK((*out)[0].scalar_type() == at::kBFloat16);
  CHECK((*out)[1].scalar_type() == at::kFloat);
  CHECK((*out)[2].scalar_type() == at::kFloat);

  // The same by hand; the float32 weight's gradient comes back in float32.
  at::Tensor w2 = w.detach().clone().requires_grad_(true);
  at::Tensor wb = w2.to(at::kBFloat16);
  at::Tensor h = at::gelu(at::linear(x.to(at::kBFloat16), wb));
  at::Tensor n = at::layer_norm(x + h, {8}, g, b, 1e-5);
  at::Tensor p = at::softmax(at::linear(n.to(at::kBFloat16), wb).to(at::kFloat), -1);
  CHECK(at::equal((*out)[0], h));
  CHECK(at::equal((*out)[1], n));
  CHECK(at::equal((*out)[2], p));
  ((*out)[2] * at::arange(8)).sum().backward();
  (p * at::arange(8)).sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().scalar_type() == at::kFloat);
  // Equal to one cast of w used twice (the two uses' bf16 gradients summed in
  // bf16, then widened), which is what autocast's cast cache does.
  CHECK(at::equal(w.grad(), w2.grad()));
}

TEST_CASE("computeMatmulsIn: a matmul's float32 inputs are cast to the 16-bit dtype, gradients "
          "flow back in float32") {
  // An RMSNorm that computes in float32 (x.float() ... * weight), then a
  // linear with a bf16 weight, and a float32 mask added to bf16 scores
  // before a matmul with bf16 values.
  const char *source = R"(
def step(x: Tensor, g: Tensor, w: Tensor, m: Tensor, v: Tensor) -> Tuple[Tensor, Tensor]:
    h = torch.to(x, dtype=torch.float32)
    n = torch.mul(torch.rsqrt(torch.mean(h * h, [-1], True) + 1e-6), h) * g
    y = torch.linear(n, w)
    p = torch.softmax(torch.matmul(y, torch.transpose(y, 0, 1)) + m, -1)
    return y, torch.matmul(p, v)
)";
  at::manual_seed(0);
  at::Tensor x = at::randn({4, 8}).to(at::kBFloat16);
  at::Tensor g = at::randn({8}).to(at::kBFloat16);
  at::Tensor w = at::randn({6, 8}).to(at::kBFloat16).requires_grad_(true);
  at::Tensor m = at::randn({4, 4}); // float32
  at::Tensor v = at::randn({4, 3}).to(at::kBFloat16);

  auto plain = Program::compile(source, "rank0.py");
  REQUIRE(plain.isOk());
  REQUIRE(plain->setEntry("step").isOk());
  auto failed = plain->run({x, g, w, m, v});
  REQUIRE(!failed.isOk()); // linear(float32, bf16)
  CHECK_THAT(failed.status().message(), Catch::Matchers::ContainsSubstring("rank0.py"));

  auto program = Program::compile(source, "rank0.py");
  REQUIRE(program.isOk());
  REQUIRE(program->setEntry("step").isOk());
  CHECK(program->computeMatmulsIn(at::kBFloat16) == 3); // the linear and both matmuls
  CHECK(program->computeMatmulsIn(at::kBFloat16) == 0); // already rewritten
  auto out = program->run({x, g, w, m, v});
  INFO(out.status().message());
  REQUIRE(out.isOk());
  CHECK((*out)[0].scalar_type() == at::kBFloat16);
  CHECK((*out)[1].scalar_type() == at::kBFloat16);

  // The same by hand.
  at::Tensor w2 = w.detach().clone().requires_grad_(true);
  at::Tensor h = x.to(at::kFloat);
  at::Tensor n = at::rsqrt((h * h).mean({-1}, true) + 1e-6) * h * g;
  at::Tensor y = at::linear(n.to(at::kBFloat16), w2);
  CHECK(at::equal((*out)[0], y));
  (*out)[0].sum().backward();
  y.sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().scalar_type() == at::kBFloat16);
  CHECK(at::equal(w.grad(), w2.grad()));
}
