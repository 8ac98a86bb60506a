// Optimizers and gradient clipping against PyTorch 1.13 itself: the same
// parameters and gradients go through torch.optim (test/parity/
// optim_reference.py, run with Debian's python3) and through ours, and the
// results must be equal bit for bit. Skipped when that Python is missing.
#include "../CatchCompat.h"
#include "OpRecorder.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "nnsc/Runtime/Optimizer.h"
#include "nnsc/Runtime/OptimizerStateKey.h"
#include "nnsc/Support/Safetensors.h"
#include "nnsc/Torch/Compat.h"

using namespace nnsc;
using namespace nnsc::rt;
namespace fs = std::filesystem;

namespace {

const char *kPython = "/usr/bin/python3";

struct Case {
  OptimizerConfig config;
  double maxNorm = 0;
  std::vector<double> lrs{1e-2, 3e-2, 2e-2, 5e-3};
};

std::vector<at::Tensor> initialParams() {
  at::manual_seed(7);
  return {at::randn({5, 4}), at::randn({4}), at::randn({3, 2, 2})};
}

at::Tensor gradOf(size_t step, size_t i, const at::Tensor &p) {
  at::manual_seed(100 + 10 * step + i);
  return at::randn(p.sizes()) * 0.5;
}

std::string joined(const std::vector<double> &v) {
  std::string out;
  for (double x : v)
    out += (out.empty() ? "" : ",") + fmt::format("{:.17g}", x);
  return out;
}

void writeInputs(const Case &c, const std::string &path) {
  std::vector<at::Tensor> keep = initialParams();
  std::vector<std::string> names;
  for (size_t i = 0; i < 3; ++i)
    names.push_back(fmt::format("p{}", i));
  for (size_t k = 0; k < c.lrs.size(); ++k)
    for (size_t i = 0; i < 3; ++i) {
      keep.push_back(gradOf(k, i, keep[i]));
      names.push_back(fmt::format("g{}_{}", k, i));
    }
  std::vector<SafetensorsEntry> entries;
  for (size_t j = 0; j < keep.size(); ++j)
    entries.push_back({names[j],
                       "F32",
                       keep[j].sizes().vec(),
                       {static_cast<const char *>(keep[j].data_ptr()), size_t(keep[j].nbytes())}});
  const OptimizerConfig &o = c.config;
  std::map<std::string, std::string> meta = {
      {"optimizer", o.name},
      {"lr", joined(c.lrs)},
      {"betas", joined({o.beta1, o.beta2})},
      {"eps", fmt::format("{:.17g}", o.eps)},
      {"weight_decay", fmt::format("{:.17g}", o.weightDecay)},
      {"momentum", fmt::format("{:.17g}", o.momentum)},
      {"max_norm", fmt::format("{:.17g}", c.maxNorm)},
      {"foreach", o.foreach == "true" ? "true" : "false"},
      {"fused", o.fused}};
  REQUIRE(writeSafetensors(path, entries, meta).isOk());
}

std::map<std::string, at::Tensor> readAll(const std::string &path) {
  auto file = SafetensorsFile::open(path);
  REQUIRE(file.isOk());
  std::map<std::string, at::Tensor> out;
  for (const auto &e : (*file)->entries()) {
    at::Tensor t = at::empty(e.shape, at::kFloat);
    std::memcpy(t.data_ptr(), e.bytes.data(), e.bytes.size());
    out[e.name] = t;
  }
  return out;
}

void runCase(const Case &c) {
  if (!fs::exists(kPython) || std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    WARN("no Debian python3 with torch; skipping the PyTorch comparison");
    return;
  }
  fs::path dir = fs::temp_directory_path() / fmt::format("nnsc-optim-{}", ::getpid());
  fs::create_directories(dir);
  writeInputs(c, (dir / "in.safetensors").string());
  std::string cmd =
      fmt::format("{} {}/test/parity/optim_reference.py {} {}", kPython, NNSC_SOURCE_DIR,
                  (dir / "in.safetensors").string(), (dir / "out.safetensors").string());
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto want = readAll((dir / "out.safetensors").string());

  std::vector<at::Tensor> params = initialParams();
  std::vector<OptimParam> ops;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].requires_grad_(true);
    ops.push_back({std::to_string(i), params[i], params[i].dim() >= 2});
  }
  Optimizer opt(c.config, ops);
  for (size_t k = 0; k < c.lrs.size(); ++k) {
    for (size_t i = 0; i < params.size(); ++i)
      params[i].mutable_grad() = gradOf(k, i, params[i]);
    auto norm = clipGradNorm(params, {1, 1, 1}, c.maxNorm, {});
    REQUIRE(norm.isOk());
    CHECK(norm->item<float>() == want[fmt::format("norm_{}", k)].item<float>());
    opt.step(c.lrs[k]);
  }
  for (size_t i = 0; i < params.size(); ++i)
    CHECK(at::equal(params[i].detach(), want[fmt::format("p{}", i)]));
  for (const auto &[key, value] : opt.state())
    if (key.find("/step") == std::string::npos)
      CHECK(at::equal(value, want.at(key)));
  fs::remove_all(dir);
}

// Two optimizers over equal parameters and gradients for three steps, in
// step `noneStep` of which parameter 1 has no gradient (its step count falls
// behind; an SGD momentum buffer starts late). Their parameters and states.
struct SideBySide {
  std::vector<at::Tensor> a, b;
  std::map<std::string, at::Tensor> stateA, stateB;
};

SideBySide stepSideBySide(const OptimizerConfig &x, const OptimizerConfig &y, size_t noneStep) {
  SideBySide r{initialParams(), initialParams(), {}, {}};
  std::vector<OptimParam> opsA, opsB;
  for (size_t i = 0; i < r.a.size(); ++i) {
    r.a[i].requires_grad_(true);
    r.b[i].requires_grad_(true);
    opsA.push_back({std::to_string(i), r.a[i], r.a[i].dim() >= 2});
    opsB.push_back({std::to_string(i), r.b[i], r.b[i].dim() >= 2});
  }
  Optimizer oa(x, opsA), ob(y, opsB);
  for (size_t k = 0; k < 3; ++k) {
    for (size_t i = 0; i < r.a.size(); ++i) {
      bool none = k == noneStep && i == 1;
      r.a[i].mutable_grad() = none ? at::Tensor() : gradOf(k, i, r.a[i]);
      r.b[i].mutable_grad() = none ? at::Tensor() : gradOf(k, i, r.b[i]);
    }
    oa.step(1e-2);
    ob.step(1e-2);
  }
  r.stateA = oa.state();
  r.stateB = ob.state();
  REQUIRE(r.stateA.size() == r.stateB.size());
  return r;
}

} // namespace

TEST_CASE("optimizer: AdamW with clipping equals torch.optim.AdamW bit for bit",
          "[runtime][optim]") {
  Case c;
  c.config.name = "adamw";
  c.config.beta2 = 0.95;
  c.config.weightDecay = 0.1;
  c.maxNorm = 1.0;
  runCase(c);
}

TEST_CASE("optimizer: Adam with L2 decay equals torch.optim.Adam", "[runtime][optim]") {
  Case c;
  c.config.name = "adam";
  c.config.weightDecay = 0.01;
  c.config.eps = 1e-6;
  runCase(c);
}

TEST_CASE("optimizer: SGD with momentum equals torch.optim.SGD", "[runtime][optim]") {
  Case c;
  c.config.name = "sgd";
  c.config.momentum = 0.9;
  c.config.weightDecay = 0.05;
  c.maxNorm = 0.5;
  runCase(c);
}

// The multi-tensor path against torch.optim's foreach=True: the same result
// bit for bit (on cpu the _foreach ops loop over single-tensor kernels).
TEST_CASE("optimizer: foreach AdamW, Adam and SGD equal torch.optim's foreach=True",
          "[runtime][optim]") {
  for (const char *name : {"adamw", "adam", "sgd"}) {
    CAPTURE(name);
    Case c;
    c.config.name = name;
    c.config.foreach = "true";
    c.config.weightDecay = 0.05;
    c.config.momentum = 0.9;
    c.config.beta2 = 0.95;
    c.maxNorm = 1.0;
    runCase(c);
  }
}

// auto takes the multi-tensor path only on cuda; on cpu it is the
// single-tensor one, and the two agree bit for bit over three steps, in one of
// which a parameter has no gradient.
TEST_CASE("optimizer: the foreach and single-tensor paths agree bit for bit on cpu",
          "[runtime][optim]") {
  for (const char *name : {"adamw", "sgd"}) {
    CAPTURE(name);
    OptimizerConfig single, multi;
    single.name = multi.name = name;
    single.weightDecay = multi.weightDecay = 0.1;
    single.momentum = multi.momentum = 0.9;
    single.foreach = "auto";
    multi.foreach = "true";
    SideBySide r = stepSideBySide(single, multi, /*noneStep=*/1);
    for (size_t i = 0; i < r.a.size(); ++i)
      CHECK(at::equal(r.a[i].detach(), r.b[i].detach()));
    for (const auto &[key, value] : r.stateA)
      CHECK(at::equal(value, r.stateB.at(key)));
  }
}

#if NNSC_TORCH_AT_LEAST(2, 4)
// PyTorch's fused kernels against torch.optim's fused=True: the same kernels
// on the same tensors and step counts, so the same bits.
TEST_CASE("optimizer: fused AdamW, Adam and SGD equal torch.optim's fused=True",
          "[runtime][optim]") {
  for (const char *name : {"adamw", "adam", "sgd"}) {
    CAPTURE(name);
    Case c;
    c.config.name = name;
    c.config.fused = "true";
    c.config.weightDecay = 0.05;
    c.config.momentum = 0.9;
    c.config.beta2 = 0.95;
    c.maxNorm = 1.0;
    runCase(c);
  }
}

// optimizer.fused is what runs the fused kernels: one call per update (the
// parameters share a device and dtype), and no single-tensor update beside
// it; without it no fused kernel runs. (Checks with a tolerance, such as the
// parity runs', cannot tell the paths apart: they differ by rounding only.)
TEST_CASE("optimizer: fused true runs PyTorch's fused kernels and only then", "[runtime][optim]") {
  for (const auto &[name, kernel] :
       {std::pair{"adamw", "aten::_fused_adamw_"}, std::pair{"adam", "aten::_fused_adam_"},
        std::pair{"sgd", "aten::_fused_sgd_"}})
    for (const char *fused : {"true", "false"}) {
      CAPTURE(name, fused);
      OptimizerConfig config;
      config.name = name;
      config.momentum = 0.9;
      config.fused = fused;
      std::vector<at::Tensor> params = initialParams();
      std::vector<OptimParam> ops;
      for (size_t i = 0; i < params.size(); ++i) {
        params[i].requires_grad_(true);
        params[i].mutable_grad() = gradOf(0, i, params[i]);
        ops.push_back({std::to_string(i), params[i], params[i].dim() >= 2});
      }
      Optimizer opt(config, ops);
      std::set<std::string> ran = test::operatorsRunBy([&] { opt.step(1e-2); });
      CHECK(ran.count(kernel) == (std::string(fused) == "true" ? 1u : 0u));
      // The single-tensor update's last operation on the parameter.
      const char *single = std::string(name) == "sgd" ? "aten::add_" : "aten::addcdiv_";
      CHECK(ran.count(single) == (std::string(fused) == "true" ? 0u : 1u));
    }
}

// The fused kernels compute what the single-tensor path computes, up to
// rounding, over three steps in one of which a parameter has no gradient: its
// step count falls behind, and its SGD momentum buffer starts a step later.
TEST_CASE("optimizer: the fused and single-tensor paths agree up to rounding", "[runtime][optim]") {
  for (const char *name : {"adamw", "adam", "sgd"}) {
    CAPTURE(name);
    OptimizerConfig single, fused;
    single.name = fused.name = name;
    single.weightDecay = fused.weightDecay = 0.1;
    single.momentum = fused.momentum = 0.9;
    fused.fused = "true";
    REQUIRE(Optimizer(fused, {}).usesFused());
    SideBySide r = stepSideBySide(single, fused, /*noneStep=*/0);
    for (size_t i = 0; i < r.a.size(); ++i) {
      CAPTURE(i);
      // Every parameter moved (from its initial values) ...
      CHECK_FALSE(at::allclose(r.b[i].detach(), initialParams()[i], 0, 1e-4));
      // ... and where the single-tensor path moved it, to within float32 rounding.
      CHECK(at::allclose(r.a[i].detach(), r.b[i].detach(), 1e-5, 1e-6));
    }
    for (const auto &[key, value] : r.stateA)
      CHECK(at::allclose(value, r.stateB.at(key), 1e-5, 1e-7));
  }
}
#endif

TEST_CASE("optimizer: state round trip continues identically", "[runtime][optim]") {
  OptimizerConfig cfg;
  cfg.weightDecay = 0.1;
  auto make = [] {
    std::vector<at::Tensor> ps = initialParams();
    for (auto &p : ps)
      p.requires_grad_(true);
    return ps;
  };
  auto a = make(), b = make();
  auto opsOf = [](std::vector<at::Tensor> &ps) {
    std::vector<OptimParam> ops;
    for (size_t i = 0; i < ps.size(); ++i)
      ops.push_back({std::to_string(i), ps[i], ps[i].dim() >= 2});
    return ops;
  };
  Optimizer oa(cfg, opsOf(a)), ob(cfg, opsOf(b));
  auto stepBoth = [&](size_t k, bool both) {
    for (size_t i = 0; i < a.size(); ++i) {
      a[i].mutable_grad() = gradOf(k, i, a[i]);
      b[i].mutable_grad() = gradOf(k, i, b[i]);
    }
    oa.step(1e-2);
    if (both)
      ob.step(1e-2);
  };
  stepBoth(0, true);
  stepBoth(1, true);
  std::map<std::string, at::Tensor> saved;
  for (const auto &[k, v] : oa.state())
    saved[k] = v.clone();
  Optimizer oc(cfg, opsOf(b)); // a fresh optimizer restored from the state
  REQUIRE(oc.loadState(saved, "test").isOk());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].mutable_grad() = gradOf(2, i, a[i]);
    b[i].mutable_grad() = gradOf(2, i, b[i]);
  }
  oa.step(1e-2);
  oc.step(1e-2);
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(at::equal(a[i].detach(), b[i].detach()));
  CHECK(!oc.loadState({{"nope/exp_avg", at::zeros({1})}}, "ckpt").isOk());
}

// clip_grad_norm_'s foreach path: the same norm and scaled gradients as the
// per-tensor one (up to the norm kernels' summation order); and the
// multi-tensor zeroGrad.
TEST_CASE("optimizer: foreach clipping and zeroing agree with the per-tensor path",
          "[runtime][optim]") {
  std::vector<at::Tensor> a = initialParams(), b = initialParams();
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].mutable_grad() = gradOf(0, i, a[i]) * 4; // large enough to clip at 1
    b[i].mutable_grad() = gradOf(0, i, b[i]) * 4;
  }
  GradNormScope single, multi;
  multi.foreach = true;
  auto na = clipGradNorm(a, {1, 1, 1}, 1.0, single);
  auto nb = clipGradNorm(b, {1, 1, 1}, 1.0, multi);
  REQUIRE(na.isOk());
  REQUIRE(nb.isOk());
  CHECK(na->item<double>() > 1.0);
  CHECK(at::allclose(*na, *nb, 1e-6, 0));
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(at::allclose(a[i].grad(), b[i].grad(), 1e-6, 1e-7));
  // The clipped gradients have norm 1 (to clip_grad_norm_'s 1e-6).
  at::Tensor squares = at::zeros({}, at::kDouble);
  for (const at::Tensor &p : b)
    squares += p.grad().to(at::kDouble).pow(2).sum();
  CHECK(std::abs(squares.sqrt().item<double>() - 1.0) < 1e-5);

  OptimizerConfig cfg;
  cfg.foreach = "true";
  std::vector<OptimParam> ops;
  for (size_t i = 0; i < b.size(); ++i)
    ops.push_back({std::to_string(i), b[i], true});
  Optimizer opt(cfg, ops);
  CHECK(opt.usesForeach());
  at::Tensor kept = b[0].grad();
  opt.zeroGrad();
  for (const at::Tensor &p : b)
    CHECK(at::equal(p.grad(), at::zeros_like(p)));
  CHECK(b[0].grad().is_same(kept)); // zeroed in place, kept allocated
}

TEST_CASE("optimizer state keys: whole shards and ZeRO pieces round trip; malformed ones do not "
          "parse",
          "[runtime][optimizer]") {
  auto whole = parseOptimizerStateKey(optimizerStateKey("p3", "exp_avg"));
  REQUIRE(whole);
  CHECK(whole->param == "p3");
  CHECK(whole->field == "exp_avg");
  CHECK(whole->offset == -1);
  auto piece = parseOptimizerStateKey(optimizerStateKey("p3", "exp_avg_sq", 128));
  REQUIRE(piece);
  CHECK(optimizerStateKey("p3", "exp_avg_sq", 128) == "p3/exp_avg_sq@128");
  CHECK(piece->param == "p3");
  CHECK(piece->field == "exp_avg_sq");
  CHECK(piece->offset == 128);
  CHECK(parseOptimizerStateKey("p3/step@0")->offset == 0);
  CHECK(parseOptimizerStateKey("p3/exp_avg@999999999999999999")->offset == 999999999999999999);
  CHECK_FALSE(parseOptimizerStateKey("p3"));            // no field
  CHECK_FALSE(parseOptimizerStateKey("p3/exp_avg@"));   // no offset
  CHECK_FALSE(parseOptimizerStateKey("p3/exp_avg@-1")); // not a decimal
  CHECK_FALSE(parseOptimizerStateKey("p3/exp_avg@12a"));
  CHECK_FALSE(parseOptimizerStateKey("p3/exp_avg@9999999999999999999")); // past int64_t
}
