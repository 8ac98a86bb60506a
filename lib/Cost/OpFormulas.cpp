// Ops whose cost is not "a pass over their tensors": products, convolution,
// attention, normalization, embedding, cross entropy.
#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include "OpFormulas.h"

namespace nnsc::cost::formulas {

namespace {

const TensorInfo &in(const OpShapes &p, size_t i) { return p.inputs.at(i); }
double dim(const TensorInfo &t, int d) {
  int r = static_cast<int>(t.shape.size());
  int k = d < 0 ? d + r : d;
  return k >= 0 && k < r ? static_cast<double>(t.shape[static_cast<size_t>(k)]) : 1.0;
}

// A product of `a` and `b` with `flops` forward (one GEMM each way): the
// gradient of each operand that needs one is another GEMM of the same size
// reading the output gradient and the other operand. Each operand is saved
// when the other needs a gradient. `extra` inputs (a bias) add their grads
// as a reduction of the output gradient.
OpCost product(const OpShapes &p, size_t a, size_t b, double flops,
               const std::vector<size_t> &bias) {
  OpCost c;
  c.cls = CostClass::Matmul;
  double out = sumBytes(p.outputs), outN = outNumel(p);
  c.forward = {flops + (bias.empty() ? 0 : outN), sumBytes(p.inputs) + out, 1, true};
  if (!anyNeedsGrad(p))
    return c;
  c.backward.matmul = true;
  for (auto [self, other] : {std::pair{a, b}, std::pair{b, a}}) {
    if (!in(p, self).needsGrad)
      continue;
    c.backward.flops += flops;
    c.backward.bytes += out + in(p, other).bytes() + in(p, self).bytes();
    c.backward.kernels += 1;
    c.saved.inputs.push_back(static_cast<int>(other));
  }
  for (size_t i : bias)
    if (in(p, i).needsGrad) {
      c.backward.flops += outN;
      c.backward.bytes += out + in(p, i).bytes();
      c.backward.kernels += 1;
    }
  std::sort(c.saved.inputs.begin(), c.saved.inputs.end());
  return c;
}

// linear(x[..., k], w[n, k], b[n]): 2 * M * n * k, M = numel(x) / k.
OpCost linear(const OpShapes &p) {
  double k = dim(in(p, 0), -1), n = dim(in(p, 1), 0);
  double m = in(p, 0).numel() / std::max(k, 1.0);
  std::vector<size_t> bias;
  if (p.inputs.size() > 2)
    bias.push_back(2);
  return product(p, 0, 1, 2 * m * n * k, bias);
}

// A product of two batched operands (both of rank 3 or more: attention's
// scores and context, not a weight): its per-batch GEMM's smallest dim, the
// shape class its rate depends on (Work::batchedDim); 0 otherwise.
void markBatched(OpCost &c, const OpShapes &p, size_t a, size_t b) {
  const TensorInfo &x = in(p, a), &y = in(p, b);
  if (x.shape.size() < 3 || y.shape.size() < 3)
    return;
  double m = dim(x, -2), k = dim(x, -1), n = dim(y, -1);
  c.forward.batchedDim = c.backward.batchedDim = std::min({m, n, k});
}

// matmul/mm/bmm (any broadcasting): 2 * numel(out) * k, k the contracted
// size (the last dim of the first operand).
OpCost matmul(const OpShapes &p) {
  OpCost c = product(p, 0, 1, 2 * outNumel(p) * dim(in(p, 0), -1), {});
  markBatched(c, p, 0, 1);
  return c;
}

// addmm(self, m1, m2) / baddbmm / addmv: the product plus beta*self.
OpCost addmm(const OpShapes &p) {
  OpCost c = product(p, 1, 2, 2 * outNumel(p) * dim(in(p, 1), -1), {0});
  markBatched(c, p, 1, 2);
  return c;
}

// einsum: 2 * numel(out) * the sizes of the summed-out letters.
OpCost einsum(const OpShapes &p) {
  const ir::Argument *eq = p.node->arg("equation");
  std::string e = eq && std::holds_alternative<std::string>(eq->value)
                      ? std::get<std::string>(eq->value)
                      : std::string();
  auto arrow = e.find("->");
  std::string lhs = e.substr(0, arrow), rhs = arrow == std::string::npos ? "" : e.substr(arrow + 2);
  double contracted = 1;
  std::set<char> seen;
  size_t operand = 0, pos = 0;
  for (char ch : lhs) {
    if (ch == ',') {
      ++operand, pos = 0;
      continue;
    }
    if (ch == '.' || ch == ' ')
      continue; // ellipsis dims appear in the output
    if (std::isalpha(static_cast<unsigned char>(ch)) && operand < p.inputs.size() &&
        rhs.find(ch) == std::string::npos && seen.insert(ch).second)
      contracted *= dim(in(p, operand), static_cast<int>(pos));
    ++pos;
  }
  double flops = 2 * outNumel(p) * contracted;
  if (p.inputs.size() == 2)
    return product(p, 0, 1, flops, {});
  OpCost c;
  c.cls = CostClass::Matmul;
  c.forward = {flops, sumBytes(p.inputs) + sumBytes(p.outputs), 1, true};
  if (anyNeedsGrad(p)) {
    c.saved = savedByRule(p, SaveRule::Inputs);
    c.backward = {flops * gradInputs(p), sumBytes(p.inputs) + gradInputBytes(p), gradInputs(p),
                  true};
  }
  return c;
}

// conv (weight [Cout, Cin/groups, *k]): 2 * N * prod(out spatial) *
// numel(weight); transposed (weight [Cin, Cout/groups, *k]): over the input's
// spatial positions instead. Stride, padding, dilation and groups enter
// through the shapes.
OpCost conv(const OpShapes &p) {
  const std::string &op = p.node->op;
  bool transposed = op.find("conv_transpose") != std::string::npos;
  if (const ir::Argument *a = p.node->arg("transposed"))
    if (std::holds_alternative<bool>(a->value))
      transposed = std::get<bool>(a->value);
  const TensorInfo &w = in(p, 1);
  const TensorInfo &pos = transposed ? in(p, 0) : p.outputs.at(0);
  size_t spatial = w.shape.size() >= 2 ? w.shape.size() - 2 : 0;
  double positions = 1;
  for (size_t d = 0; d < spatial; ++d)
    positions *= dim(pos, -1 - static_cast<int>(d));
  double batch = pos.shape.size() > spatial + 1 ? dim(pos, 0) : 1; // unbatched input
  std::vector<size_t> bias;
  if (p.inputs.size() > 2)
    bias.push_back(2);
  OpCost c = product(p, 0, 1, 2 * batch * positions * w.numel(), bias);
  c.cls = CostClass::Conv;
  return c;
}

// sdpa(q[..., L, E], k[..., S, E], v[..., S, Ev]): QK^T and PV, 2*B*L*S*E
// and 2*B*L*S*Ev; softmax (scale, max, exp, sum, divide) 5 per score; a
// causal mask halves all three. A fused kernel reads q, k, v (and a mask)
// and writes the output and the log-sum-exp. Backward (as FlashAttention):
// recompute QK^T, then dV, dP, dQ, dK: 2.5x the forward matmuls, the
// softmax backward 4 per score; saves q, k, v, the output and the lse.
OpCost attention(const OpShapes &p) {
  const TensorInfo &q = in(p, 0), &k = in(p, 1), &v = in(p, 2);
  double L = dim(q, -2), E = dim(q, -1), S = dim(k, -2), Ev = dim(v, -1);
  double B = q.numel() / std::max(L * E, 1.0);
  bool causal = false;
  if (const ir::Argument *a = p.node->arg("is_causal"))
    if (std::holds_alternative<bool>(a->value))
      causal = std::get<bool>(a->value);
  double frac = causal ? 0.5 : 1.0;
  double mm = 2 * B * L * S * (E + Ev) * frac, scores = B * L * S * frac;
  double lse = B * L * 4; // float32 log-sum-exp per query row
  OpCost c;
  c.cls = CostClass::Attention;
  c.forward = {mm + 5 * scores, sumBytes(p.inputs) + sumBytes(p.outputs) + lse, 1, true};
  if (!anyNeedsGrad(p))
    return c;
  c.saved.inputs = {0, 1, 2};
  c.saved.outputs = {0};
  c.saved.extraBytes = lse;
  double mask = p.inputs.size() > 3 ? in(p, 3).bytes() : 0;
  c.backward = {2.5 * mm + 4 * scores,
                q.bytes() + k.bytes() + v.bytes() + mask + 2 * sumBytes(p.outputs) + lse +
                    gradInputBytes(p),
                1, true};
  return c;
}

// Statistics per row: layer_norm over its normalized_shape, group_norm per
// (N, group), batch_norm per channel, instance_norm per (N, C), rms_norm per row.
double normRows(const OpShapes &p) {
  const std::string &op = p.node->op;
  const TensorInfo &x = in(p, 0);
  if (op.find("batch_norm") != std::string::npos)
    return dim(x, 1);
  if (op.find("instance_norm") != std::string::npos)
    return dim(x, 0) * dim(x, 1);
  if (op.find("group_norm") != std::string::npos)
    return dim(x, 0) *
           static_cast<double>(std::max<int64_t>(
               1, p.node->intArg(op == "aten::group_norm" ? "num_groups" : "group", 1)));
  double normalized = 1;
  if (const ir::Argument *a = p.node->arg("normalized_shape"))
    if (std::holds_alternative<std::vector<int64_t>>(a->value))
      for (int64_t d : std::get<std::vector<int64_t>>(a->value))
        normalized *= static_cast<double>(d);
  return x.numel() / std::max(normalized, 1.0);
}

// Normalization: forward 8 FLOPs per element (mean, variance, normalize,
// scale, shift; rms_norm 4), writes the output and the per-row statistics
// (float32 mean and rstd; rms_norm rstd only). Backward reads the output
// gradient, the input and the statistics, writes the input gradient (12 per
// element) and reduces weight/bias gradients (2 per element).
OpCost norm(const OpShapes &p, const OpTraits &t) {
  bool rms = p.node->op == "aten::rms_norm";
  double n = in(p, 0).numel(), stats = normRows(p) * 4 * (rms ? 1 : 2);
  OpCost c;
  c.cls = CostClass::Norm;
  c.forward = {(rms ? 4 : t.fwdFlops) * n, sumBytes(p.inputs) + sumBytes(p.outputs) + stats, 1,
               false};
  if (!anyNeedsGrad(p))
    return c;
  c.saved.inputs = {0};
  c.saved.extraBytes = stats;
  double params = 0;
  for (size_t i = 1; i < p.inputs.size(); ++i)
    params += in(p, i).needsGrad ? 2 * n : 0;
  c.backward = {(in(p, 0).needsGrad ? t.bwdFlops * n : 0) + params,
                sumBytes(p.outputs) + sumBytes(p.inputs) + stats + gradInputBytes(p), 2, false};
  return c;
}

// embedding(weight[V, D], indices): forward gathers rows (reads and writes
// the output's bytes, reads the indices). Backward: zero the weight
// gradient (V*D written), then index_add the output gradient into it (reads
// the gradient and the indices, read-modify-writes the touched rows): one
// add per output element.
OpCost embedding(const OpShapes &p) {
  const TensorInfo &w = in(p, 0), &idx = in(p, 1);
  double out = sumBytes(p.outputs);
  OpCost c;
  c.cls = CostClass::Embedding;
  c.forward = {0, 2 * out + idx.bytes(), 1, false};
  if (!w.needsGrad)
    return c;
  c.saved.inputs = {1};
  c.backward = {outNumel(p), w.bytes() + out + idx.bytes() + 2 * out, 2, false};
  return c;
}

// A loss's floating input as the loss reads it: in the dtype of the loss's
// output when that is wider. Mixed precision computes losses in float32 on
// upcast copies of their 16-bit inputs (Cost/PrecisionView.h); in one dtype
// this is `t` itself.
TensorInfo inLossDType(const TensorInfo &t, const OpShapes &p) {
  TensorInfo wide = t;
  for (const TensorInfo &o : p.outputs)
    if (ir::isFloatingPoint(t.dtype) && ir::isFloatingPoint(o.dtype) &&
        ir::dtypeSize(o.dtype) > ir::dtypeSize(t.dtype))
      wide.dtype = o.dtype;
  return wide;
}

// The upcast copy of `t` into `wide`: read one, write the other (none when
// they are the same dtype).
double upcastBytes(const TensorInfo &t, const TensorInfo &wide) {
  return t.dtype == wide.dtype ? 0 : t.bytes() + wide.bytes();
}

// cross_entropy(x[N, C, ...], target): log_softmax (5 per element; its output
// kept for backward) then nll (gather one per row, reduce). Backward: zero a
// [N, C] gradient and scatter -1/N per row (nll_loss_backward), then
// log_softmax_backward (read gradient and log-probs, write dx: 4 per element).
OpCost crossEntropy(const OpShapes &p) {
  const TensorInfo &logits = in(p, 0), &target = in(p, 1);
  TensorInfo x = inLossDType(logits, p);
  double n = x.numel(), rows = n / std::max(dim(x, 1), 1.0);
  if (x.shape.size() == 1)
    rows = 1;
  OpCost c;
  c.cls = CostClass::Loss;
  c.forward = {5 * n + 2 * rows,
               3 * x.bytes() + target.bytes() + sumBytes(p.outputs) + upcastBytes(logits, x), 2,
               false};
  if (!x.needsGrad)
    return c;
  c.saved.inputs = {1};
  c.saved.extraBytes = x.bytes(); // the log_softmax output
  c.backward = {4 * n + rows, 4 * x.bytes() + target.bytes(), 2, false};
  return c;
}

// nll_loss(logp[N, C], target): gather one log-probability per row.
// Backward: zero a [N, C] gradient, scatter one value per row.
OpCost nllLoss(const OpShapes &p) {
  const TensorInfo x = inLossDType(in(p, 0), p), &target = in(p, 1);
  double rows = x.numel() / std::max(dim(x, 1), 1.0), elt = ir::dtypeSize(x.dtype);
  OpCost c;
  c.cls = CostClass::Loss;
  c.forward = {2 * rows, rows * elt + target.bytes() + sumBytes(p.outputs), 1, false};
  if (!x.needsGrad)
    return c;
  c.saved.inputs = {1};
  c.backward = {rows, x.bytes() + rows * elt + target.bytes(), 2, false};
  return c;
}

} // namespace

void tagVector(OpCost &c, const OpShapes &p, const char *kind) {
  double elements = 0;
  for (const auto *ts : {&p.inputs, &p.outputs})
    for (const TensorInfo &t : *ts)
      elements = std::max(elements, t.numel());
  double rows = 0;
  std::string_view k = kind;
  if (k == "norm" && !p.inputs.empty())
    rows = normRows(p);
  else if (k == "softmax" && !p.inputs.empty()) {
    const TensorInfo &x = in(p, 0);
    int64_t d = p.node->intArg("dim", -1);
    rows = x.numel() / std::max(dim(x, static_cast<int>(d)), 1.0);
  } else if (k == "loss" && !p.inputs.empty()) {
    const TensorInfo &x = in(p, 0);
    rows = x.shape.size() == 1 ? 1 : x.numel() / std::max(dim(x, 1), 1.0);
  }
  for (Work *w : {&c.forward, &c.backward}) {
    if (w->kernels == 0)
      continue;
    w->vectorKind = kind;
    w->elements = elements;
    w->rows = rows;
    w->backward = w == &c.backward;
  }
}

std::optional<OpCost> special(const OpShapes &p, const OpTraits &t) {
  const std::string &op = p.node->op;
  if (t.cls == CostClass::Matmul) {
    if (op == "aten::linear" && p.inputs.size() >= 2)
      return linear(p);
    if ((op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::addmv") &&
        p.inputs.size() == 3)
      return addmm(p);
    if (op == "aten::einsum")
      return einsum(p);
    if ((op == "aten::outer" || op == "aten::ger") && p.inputs.size() == 2)
      return product(p, 0, 1, outNumel(p), {}); // one multiply per output
    if (p.inputs.size() == 2)
      return matmul(p); // matmul mm bmm dot vdot
  }
  if (t.cls == CostClass::Conv && p.inputs.size() >= 2 && !p.outputs.empty())
    return conv(p);
  if (t.cls == CostClass::Attention && p.inputs.size() >= 3 && !p.outputs.empty())
    return attention(p);
  if (t.cls == CostClass::Norm && !p.inputs.empty())
    return norm(p, t);
  if (t.cls == CostClass::Embedding && p.inputs.size() == 2)
    return embedding(p);
  if (op == "aten::cross_entropy_loss" && p.inputs.size() >= 2)
    return crossEntropy(p);
  if (op.rfind("aten::nll_loss", 0) == 0 && p.inputs.size() >= 2)
    return nllLoss(p);
  return std::nullopt;
}

} // namespace nnsc::cost::formulas
