// Memory per device (saved activations, recompute, optimizer states, ZeRO)
// and the step-time model (compute, gradient all-reduce overlap).
#include "../CatchCompat.h"

#include "nnsc/Cost/StepTime.h"

using namespace nnsc;
using cost::TensorInfo;

namespace {

// A curve within a node over `group` ranks: `alpha` seconds plus 1 ns a byte.
cost::CommCurve lineCurve(cost::Collective c, int group, double alpha) {
  return {c, group, cost::Placement::Intra, {{1, alpha}, {1e9, alpha + 1}}};
}

TensorInfo act(ir::Shape s, bool grad = true) {
  return TensorInfo{std::move(s), ir::DType::Float32, grad, false};
}

// x[4, 16] -> linear(W[8, 16]) -> relu -> dropout -> softmax -> sum, tensor
// ids 0 (x), 1 (W), 2.. outputs.
struct Chain {
  std::vector<ir::Node> nodes{5};
  cost::DeviceLoad load;
  Chain() {
    const char *ops[] = {"aten::linear", "aten::relu", "aten::dropout", "aten::softmax",
                         "aten::sum"};
    for (int i = 0; i < 5; ++i) {
      nodes[static_cast<size_t>(i)].op = ops[i];
      cost::DevicePart p;
      p.node = i;
      p.shapes.node = &nodes[static_cast<size_t>(i)];
      if (i == 0) {
        p.shapes.inputs = {act({4, 16}, false),
                           TensorInfo{{8, 16}, ir::DType::Float32, true, true}};
        p.inputIds = {0, 1};
      } else {
        p.shapes.inputs = {act({4, 8})};
        p.inputIds = {i + 1};
      }
      p.shapes.outputs = {i == 4 ? act({}) : act({4, 8})};
      p.outputIds = {i + 2};
      load.parts.push_back(p);
    }
    load.state.push_back({1, 128, ir::DType::Float32, true});
  }
};

} // namespace

TEST_CASE("activations are what each op saves, counted once", "[cost]") {
  Chain c;
  cost::DeviceMemory m = cost::deviceMemory(c.load, {});
  // linear keeps x (256 B; W is a parameter), relu its output (128), dropout
  // its byte mask (32), softmax its output (128), sum nothing.
  CHECK(m.activationBytes == 256 + 128 + 32 + 128);
  CHECK(m.maskElements == 32); // the runtime prices them by the device's mask dtype
  CHECK(m.paramBytes == 512);
  CHECK(m.gradBytes == 512);
  CHECK(m.optimizerBytes == 128 * 8); // AdamW exp_avg + exp_avg_sq
  // The largest backward step: linear's output gradient and W's gradient.
  CHECK(m.transientBytes == 128 + 512);
}

TEST_CASE("a recompute group keeps only its inputs", "[cost]") {
  Chain c;
  for (int i = 1; i <= 3; ++i)
    c.load.parts[static_cast<size_t>(i)].recomputeGroup = 0;
  cost::DeviceMemory m = cost::deviceMemory(c.load, {});
  CHECK(m.activationBytes == 256 + 128); // x, and the group's input (linear's output)
  c.load.state.clear();
  c.load.parts[0].shapes.inputs[1].needsGrad = false; // no W gradient: the group dominates
  m = cost::deviceMemory(c.load, {});
  CHECK(m.transientBytes == 128 + 32 + 128);
}

TEST_CASE("optimizer states per optimizer, precision and ZeRO", "[cost]") {
  Chain c;
  cost::MemoryOptions o;
  o.optimizer = cost::Optimizer::Sgd;
  CHECK(cost::deviceMemory(c.load, o).optimizerBytes == 0);
  o.optimizer = cost::Optimizer::Momentum;
  CHECK(cost::deviceMemory(c.load, o).optimizerBytes == 128 * 4);
  o.optimizer = cost::Optimizer::Adam;
  o.precision = cost::Precision::BFloat16;
  cost::DeviceMemory m = cost::deviceMemory(c.load, o);
  // A 2-byte weight, a 2-byte gradient added into a 4-byte main gradient, a
  // 4-byte master and Adam's 8: Megatron's 18 bytes per parameter with its
  // float32 main grads, plus the 16-bit gradient backward writes.
  CHECK(m.paramBytes == 2 * 128);
  CHECK(m.gradBytes == 6 * 128);
  CHECK(m.optimizerBytes == 12 * 128);
  o.zero = 1;
  o.dpSize = 4;
  m = cost::deviceMemory(c.load, o);
  CHECK(m.optimizerBytes == 12 * 128 / 4);
  CHECK(m.gradBytes == 6 * 128);
  // ZeRO-3 shards what one recompute group alone reads: not this weight,
  // read outside any group.
  o.zero = 3;
  m = cost::deviceMemory(c.load, o);
  CHECK(m.paramBytes == 2 * 128);
  // Two groups' weights: each a quarter, and one group's whole while it
  // runs (a buffer beside the quarter); with prefetch (the default) the
  // next group's too.
  cost::DeviceLoad two = c.load;
  REQUIRE(two.state.size() == 1);
  two.state[0].recomputeGroup = 0;
  two.state.push_back(two.state[0]);
  two.state[1].recomputeGroup = 1;
  m = cost::deviceMemory(two, o);
  CHECK(m.paramBytes == 2 * (2 * 128 / 4) + 2 * (2 * 128));
  o.zero3Prefetch = false;
  m = cost::deviceMemory(two, o);
  CHECK(m.paramBytes == 2 * (2 * 128 / 4) + 2 * 128);
  // Groups 0 and 2 with none sharded in group 1: the runtime gathers 2
  // right after 0 (it learns its order from the gathers), so the pair is whole.
  o.zero3Prefetch = true;
  two.state[1].recomputeGroup = 2;
  m = cost::deviceMemory(two, o);
  CHECK(m.paramBytes == 2 * (2 * 128 / 4) + 2 * (2 * 128));
  // Three groups: the largest neighbouring pair, not the two largest.
  cost::DeviceLoad three = two;
  three.state.push_back(three.state[0]);
  three.state[2].recomputeGroup = 3;
  three.state[2].elements *= 4;
  three.state[0].elements *= 3;
  m = cost::deviceMemory(three, o);
  CHECK(m.paramBytes == 2 * (8 * 128) / 4 + 2 * (5 * 128));
}

TEST_CASE("step time: compute, and the gradient all-reduce exposed after backward", "[cost]") {
  Chain c;
  cost::Cluster cluster;
  cluster.device.name = "test";
  cluster.device.flops = {{"float32", 1e12}};
  cluster.device.memoryBandwidth = 1e11;
  cluster.device.launchFloor = 1e-6;
  cost::CommTable table;
  REQUIRE(table.add(lineCurve(cost::Collective::AllReduce, 2, 1e-3)).isOk());
  cluster.comm = table;
  cost::StepInput in;
  for (const cost::DevicePart &p : c.load.parts)
    in.parts.push_back(p.shapes);
  in.grads.push_back({1, 1000000, {0, 1}, 0});
  in.trainableElements = 128;
  in.trainableTensors = 1;
  auto s = cost::stepTime(in, cluster, {});
  REQUIRE(s.isOk());
  double fwd = 0, bwd = 0;
  for (const auto &p : in.parts) {
    cost::OpCost oc = cost::opCost(p);
    fwd += cost::workSeconds(oc.forward, ir::DType::Float32, cluster.device);
    bwd += cost::workSeconds(oc.backward, ir::DType::Float32, cluster.device);
  }
  CHECK(s->forwardCompute == Catch::Approx(fwd));
  CHECK(s->backwardCompute == Catch::Approx(bwd));
  // W's gradient is ready when the whole backward has run: nothing hides it.
  CHECK(s->gradReduce == Catch::Approx(1e-3 + 1e6 * (1.0 / 1e9)));
  CHECK(s->gradReduceExposed == Catch::Approx(s->gradReduce));
  CHECK(s->buckets == 1);
  CHECK(s->total() == Catch::Approx(fwd + bwd + s->gradReduce + s->optimizer));
  // Recomputed parts run their forward again in the backward.
  cost::StepInput again = in;
  again.recomputed.assign(in.parts.size(), true);
  auto r = cost::stepTime(again, cluster, {});
  REQUIRE(r.isOk());
  CHECK(r->forwardCompute == Catch::Approx(fwd));
  CHECK(r->backwardCompute == Catch::Approx(bwd + fwd));
  // AdamW as the runtime runs it: 8 kernels a tensor, 80 bytes an element;
  // around it the gradient norm and the zeroing: 4 bytes an element and a
  // kernel a tensor each, and 5 kernels on the norms.
  const double normAndZero = 128 * 8 / 1e11 + (2 + 5) * 1e-6;
  CHECK(s->optimizer == Catch::Approx(128 * 80 / 1e11 + 8 * 1e-6 + normAndZero));
  cost::StepOptions sgd;
  sgd.memory.optimizer = cost::Optimizer::Sgd;
  CHECK(cost::stepTime(in, cluster, sgd)->optimizer ==
        Catch::Approx(128 * 12 / 1e11 + 1e-6 + normAndZero));
  // A measured update bandwidth replaces the memory bandwidth for the update alone.
  cost::Cluster updating = cluster;
  updating.device.updateBandwidth = 4e11;
  auto u = cost::stepTime(in, updating, {});
  CHECK(u->optimizer == Catch::Approx(128 * 80 / 4e11 + 8 * 1e-6 + normAndZero));
  // A norm summed over two ranks: one all-reduce of a double from the table.
  cost::StepInput normed = in;
  normed.normRanks = {0, 1};
  CHECK(cost::stepTime(normed, cluster, {})->optimizer ==
        Catch::Approx(s->optimizer + 1e-3 + 8 / 1e9));
  CHECK(u->forwardCompute == Catch::Approx(fwd));
  // ZeRO-3: a recompute group's values all-gathered twice a micro-batch (its
  // forward and its re-run), from the table, but the last group's once (it
  // stays whole for its re-run, backward's first, where prefetch is on, the
  // default); nothing without stage 3.
  cost::Cluster gathering = cluster;
  REQUIRE(gathering.comm->add(lineCurve(cost::Collective::AllGather, 2, 2e-3)).isOk());
  cost::StepInput grouped = in;
  grouped.grads[0].recomputeGroup = 0;
  grouped.grads[0].valueBytes = 4000;
  grouped.grads.push_back({2, 8000, {0, 1}, 0, 1, 2000});
  cost::StepOptions three;
  three.memory.zero = 3;
  three.microBatches = 2;
  const double g0 = 2e-3 + 4000 / 1e9, g1 = 2e-3 + 2000 / 1e9;
  auto g = cost::stepTime(grouped, gathering, three);
  REQUIRE(g.isOk());
  CHECK(g->paramGather == Catch::Approx(2 * g0 + g1));
  CHECK(g->total() == Catch::Approx(2 * (g->forwardCompute + g->backwardCompute + g->paramGather) +
                                    g->gradReduceExposed + g->optimizer));
  // With the parts' groups known and prefetch on (the default), a group's
  // gather runs during the compute of the group before it in forward and of
  // the group after it in backward: only what outlasts that compute shows,
  // beside the forward's first gather.
  cost::StepInput prefetched = grouped;
  prefetched.groups = {0, 0, 1, 1, -1};
  double fwd0 = 0, bwd1 = 0;
  for (size_t i = 0; i < 4; ++i) {
    cost::OpCost oc = cost::opCost(in.parts[i]);
    double f = cost::workSeconds(oc.forward, ir::DType::Float32, gathering.device);
    double b = cost::workSeconds(oc.backward, ir::DType::Float32, gathering.device);
    fwd0 += i < 2 ? f : 0;
    bwd1 += i >= 2 ? b : 0;
  }
  REQUIRE(g1 > fwd0);
  REQUIRE(g0 > bwd1);
  auto p = cost::stepTime(prefetched, gathering, three);
  REQUIRE(p.isOk());
  CHECK(p->paramGather == Catch::Approx(g0 + (g1 - fwd0) + (g0 - bwd1)));
  CHECK(p->paramGather < g->paramGather);
  // Without prefetch every gather is waited for, the last group's twice too.
  three.memory.zero3Prefetch = false;
  CHECK(cost::stepTime(prefetched, gathering, three)->paramGather ==
        Catch::Approx(2 * g0 + 2 * g1));
  CHECK(cost::stepTime(grouped, gathering, three)->paramGather == Catch::Approx(2 * g0 + 2 * g1));
  // In ZeRO blocks (zero_ngroups) the values are sharded, and gathered,
  // over the copies of a block: 4 holders in blocks of 2 ranks gather over
  // 2 (the 2-rank curve), not over 4; a block of one rank gathers nothing.
  REQUIRE(gathering.comm->add(lineCurve(cost::Collective::AllGather, 4, 7e-3)).isOk());
  REQUIRE(gathering.comm->add(lineCurve(cost::Collective::AllReduce, 4, 3e-3)).isOk());
  cost::StepInput wide = grouped;
  for (cost::GradShard &gs : wide.grads)
    gs.ranks = {0, 1, 2, 3};
  const double w0 = 7e-3 + 4000 / 1e9, w1 = 7e-3 + 2000 / 1e9;
  CHECK(cost::stepTime(wide, gathering, three)->paramGather == Catch::Approx(2 * w0 + 2 * w1));
  three.zeroBlockRanks = 2;
  CHECK(cost::stepTime(wide, gathering, three)->paramGather == Catch::Approx(2 * g0 + 2 * g1));
  three.zeroBlockRanks = 1;
  CHECK(cost::stepTime(wide, gathering, three)->paramGather == 0);
  three.zeroBlockRanks = 0;
  three.memory.zero = 2;
  CHECK(cost::stepTime(grouped, gathering, three)->paramGather == 0);
  // A gradient ready early (its reader is the last part) overlaps the rest.
  in.grads[0].firstReader = 4;
  s = cost::stepTime(in, cluster, {});
  CHECK(s->gradReduceExposed < s->gradReduce);
  // Two micro-batches: compute twice, the reduce once.
  cost::StepOptions two;
  two.microBatches = 2;
  auto s2 = cost::stepTime(in, cluster, two);
  CHECK(s2->total() == Catch::Approx(s->total() + fwd + bwd));
  // An in-step all-reduce: the table's time plus the runtime's copy of the
  // message, at the memory bandwidth with one launch.
  cost::StepInput called = in;
  called.comm.push_back({cost::Collective::AllReduce, 1000000, {0, 1}, true, 0, 2000000});
  auto c2 = cost::stepTime(called, cluster, {});
  REQUIRE(c2.isOk());
  CHECK(c2->forwardComm == 0);
  CHECK(c2->backwardComm == Catch::Approx((1e-3 + 1e6 / 1e9) + (2e6 / 1e11 + 1e-6)));
}
