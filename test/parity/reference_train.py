"""Single-device PyTorch reference for nnsc's parity tests.

reference_train.py CONFIG.yaml --model MODEL.pt --dp N --out DIR [--float64]

Trains the traced model (torch.jit.load of the same archive nnsc traced, i.e.
the same initial weights) in ONE process with plain torch.optim, feeding
exactly the batches nnsc-run feeds to N data-parallel ranks, and writes
DIR/losses.jsonl (one {"step", "loss", "lr", "grad_norm"} per step) and
DIR/final.pt (the state_dict after the last step). --float64 trains in double
precision (weights and floating-point inputs), an estimate of the exact result
that shows how far float32 rounding alone moves the weights.

Semantics mirrored from docs/trainer-config.md:
- sample g of a step: g = ((step*accum + micro)*dp + rank)*mbs + i.
- data.kind tokens: offset(g) = mix(g ^ mix(seed)) mod (N - T - 1) (mix: SplitMix64's step) in
  uint64 arithmetic; x = tokens[o:o+T], y = tokens[o+1:o+T+1].
- data.kind tensors: a safetensors file with one [N, ...] tensor per forward
  input (keyed by the names in inputs.yaml); row(g) = a per-epoch permutation of the N
  rows (row_of), and every input gets its tensor's rows.
- each (micro, rank) loss is a mean over its micro-batch; the step's gradient
  is their average (loss / (accum*dp) per backward), the logged loss their mean.
- buffers the forward writes (BatchNorm's running statistics) follow
  data_parallel.buffers: broadcast (PyTorch DDP) runs every copy's micro-batch
  from copy 0's buffers and carries copy 0's updated buffers on; average
  carries on the mean of the copies' updated floating buffers (integer ones
  from copy 0).
- AdamW decays parameters with dim >= 2 only; clipping is clip_grad_norm_;
  cosine schedule with linear warmup as nanoGPT's get_lr.
- precision.recipe autocast (bf16): float32 training whose graph casts the inputs of
  the matmul family to bf16 and those of autocast's float32 operators to float32
  (compute_matmuls_in, compute_autocast_float32_ops), as nnsc's Program does.
- precision.mode bf16 | fp16 (MixedPrecision, docs/trainer-config.md): the model
  (weights, buffers, floating inputs) runs in the low dtype; the optimizer
  updates float32 masters, which are rounded into the model after each step.
  Each copy's gradient is summed over its micro-batches in float32 (in order);
  with several copies each copy's sum is rounded to grad_reduce_dtype (a 16-bit
  one then divided by the copy count, as nnsc's Reducer divides before a 16-bit
  reduction), the copies' parts are added in float32 (nnsc's Gloo sums bf16 in
  float32; fp16 as Gloo does, per element in float) and rounded to it again
  (float32: the sum divided by the copy count). fp16 multiplies each backward's loss by the dynamic loss scale
  (loss * scale / accum), divides the masters' gradients by it, and skips the
  step (no update, scale backed off) when any is not finite. With loss_dtype
  fp32 (the default) the loss operators take float32 inputs
  (compute_losses_in_float32, nnsc's Program::computeLossesInFloat32), and the
  matmuls take 16-bit ones (compute_matmuls_in, Program::computeMatmulsIn). This mirrors
  nnsc's order of operations, so a data-parallel run matches it to the last
  bit of the masters' arithmetic.
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch
import yaml


STEPS = [0]  # train.steps, the default decay_steps


def lr_at(step, opt, sched):
    lr = opt["lr"]
    if sched.get("name", "constant") == "constant":
        return lr
    warmup = sched.get("warmup_steps", 0)
    decay = sched.get("decay_steps", 0) or STEPS[0]
    min_lr = sched.get("min_lr", 0.0)
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > decay:
        return min_lr
    ratio = (step - warmup) / max(1, decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
          "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
          "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """{name: tensor} of a safetensors file (a small reader, no extra package)."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        dtype = DTYPES[e["dtype"]]
        buf = bytearray(data[b:end])
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"])
    return out


MASK64 = (1 << 64) - 1


def mix(x):
    """SplitMix64's step (nnsc's Dataset.cpp splitmix64)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def row_of(g, seed, n):
    """nnsc's sampleRow: epoch g // n visits every row once, in the order of a keyed
    four-round Feistel bijection of [0, 4^h) (the least power of 4 >= max(n, 4)), walked
    until it lands below n."""
    epoch, x = divmod(g, n)
    half = 1
    while half < 32 and (1 << (2 * half)) < n:
        half += 1
    mask = (1 << half) - 1
    key = mix(mix(seed) ^ epoch)
    keys = [mix((key + r) & MASK64) for r in range(4)]
    while True:
        left, right = x >> half, x & mask
        for k in keys:
            left, right = right, left ^ (mix(right ^ k) & mask)
        x = (left << half) | right
        if x < n:
            return x


def tensor_batch(tensors, names, seed, gs):
    """The inputs `names` (forward order) for global samples gs."""
    n = tensors[names[0]].shape[0]
    rows = torch.tensor([row_of(g, seed, n) for g in gs], dtype=torch.int64)
    return tuple(tensors[name][rows] for name in names)


def load_tokens(path, dtype):
    return np.fromfile(path, dtype=np.uint16 if dtype == "uint16" else np.int32).astype(np.int64)


def batch(tokens, block, seed, gs):
    n = len(tokens)
    xs, ys = [], []
    for g in gs:
        o = mix(g ^ mix(seed)) % (n - block - 1)
        xs.append(tokens[o:o + block])
        ys.append(tokens[o + 1:o + 1 + block])
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


def make_optimizer(model, opt, params=None):
    name = opt.get("name", "adamw")
    if params is None:
        params = [p for p in model.parameters() if p.requires_grad]
    # optimizer.fused: torch.optim's fused kernels (2.4+ on the CPU), else the single-tensor path
    kind = {"fused": True} if str(opt.get("fused", False)).lower() == "true" else {"foreach": False}
    if name == "sgd":
        return torch.optim.SGD(params, lr=opt["lr"], momentum=opt.get("momentum", 0.0),
                               weight_decay=opt.get("weight_decay", 0.0), **kind)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": opt.get("weight_decay", 0.0)},
              {"params": no_decay, "weight_decay": 0.0}]
    cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    return cls(groups, lr=opt["lr"], betas=tuple(opt.get("betas", [0.9, 0.999])),
               eps=opt.get("eps", 1e-8), **kind)


class DataParallelBuffers:
    """The model's buffers as nnsc-run keeps them equal across copies: every copy's
    forward of a micro-batch starts from the same buffers; afterwards copy 0's
    (broadcast) or the copies' mean (average) carry on."""

    def __init__(self, model, policy):
        self.buffers = [b for _, b in model.named_buffers()]
        self.policy = policy

    def start(self):
        self.before = [b.detach().clone() for b in self.buffers]
        self.after = []

    def before_copy(self):
        with torch.no_grad():
            for b, v in zip(self.buffers, self.before):
                b.copy_(v)

    def after_copy(self):
        self.after.append([b.detach().clone() for b in self.buffers])

    def finish(self):
        with torch.no_grad():
            for i, b in enumerate(self.buffers):
                copies = [a[i] for a in self.after]
                if self.policy == "average" and b.is_floating_point():
                    b.copy_(torch.stack(copies).mean(dim=0))
                else:
                    b.copy_(copies[0])


LOW = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class LossScaler:
    """LossScaler.h: Megatron's DynamicGradScaler (PyTorch's GradScaler with hysteresis 1)."""

    def __init__(self, cfg):
        self.initial = float(cfg.get("initial", 65536))
        self.growth = float(cfg.get("growth_factor", 2.0))
        self.backoff = float(cfg.get("backoff_factor", 0.5))
        self.interval = int(cfg.get("growth_interval", 1000))
        self.min = float(cfg.get("min", 1.0))
        self.hysteresis = int(cfg.get("hysteresis", 1))
        self.scale, self.clean, self.left = self.initial, 0, self.hysteresis

    def update(self, overflow):
        if overflow:
            self.clean = 0
            self.left -= 1
            if self.left <= 0:
                self.scale = max(self.scale * self.backoff, self.min)
            return
        self.clean += 1
        if self.clean >= self.interval:
            self.clean, self.left = 0, self.hysteresis
            self.scale *= self.growth


class MixedPrecision:
    """The model in the low dtype, float32 masters for the optimizer (see the module text)."""

    def __init__(self, model, cfg):
        self.mode = cfg.get("mode", "fp32")
        self.low = LOW[self.mode]
        self.reduce = LOW[cfg.get("grad_reduce_dtype", "fp32")]
        self.dtypes = {k: v.dtype for k, v in model.state_dict().items()}
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.masters = [p.detach().clone().float() for p in self.params]
        model.to(self.low)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.scaler = LossScaler(cfg.get("loss_scale", {}) or {}) if self.mode == "fp16" else None
        for m in self.masters:
            m.requires_grad_(True)

    def loss_scale(self):
        return self.scaler.scale if self.scaler else 1.0

    def input(self, t):
        return t.to(self.low) if t.is_floating_point() else t

    def copy_grads(self, sums):
        """Adds the model's low-precision grads into `sums` (float32, one per param), clears them."""
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad.float()
            sums[i] = g if sums[i] is None else sums[i] + g
            p.grad = None

    def reduce_copies(self, per_copy):
        """The masters' grads from each copy's float32 sums, as nnsc's reducers make them."""
        dp = len(per_copy)
        for i, m in enumerate(self.masters):
            sums = [c[i] if c[i] is not None else torch.zeros_like(m) for c in per_copy]
            if dp == 1:
                m.grad = sums[0]
                continue
            if self.reduce == torch.float32:
                total = sums[0]
                for s in sums[1:]:
                    total = total + s
                m.grad = total / dp
                continue
            # A 16-bit reduction divides first (nnsc's Reducer, as Megatron).
            total = (sums[0].to(self.reduce) / dp).float()
            for s in sums[1:]:
                total = total + (s.to(self.reduce) / dp).float()
            m.grad = total.to(self.reduce).float()

    def unscale(self):
        """fp16: grads / scale; True when any is not finite (the step is skipped)."""
        if not self.scaler:
            return False
        inverse = 1.0 / self.scaler.scale
        bad = False
        for m in self.masters:
            m.grad.mul_(inverse)
            bad = bad or not bool(torch.isfinite(m.grad).all())
        return bad

    def copy_masters(self):
        with torch.no_grad():
            for p, m in zip(self.params, self.masters):
                p.copy_(m)

    def state_dict(self, model):
        """The model's state with float32 masters for parameters, buffers in their first dtype."""
        by_ptr = {p.data_ptr(): m for p, m in zip(self.params, self.masters)}
        return {k: by_ptr[v.data_ptr()].detach().clone() if v.data_ptr() in by_ptr
                else v.to(self.dtypes[k]) for k, v in model.state_dict().items()}


LOSS_OPS = {"aten::cross_entropy_loss", "aten::nll_loss", "aten::nll_loss_nd", "aten::nll_loss2d",
            "aten::nll_loss_forward", "aten::mse_loss", "aten::l1_loss", "aten::smooth_l1_loss",
            "aten::huber_loss", "aten::binary_cross_entropy",
            "aten::binary_cross_entropy_with_logits", "aten::soft_margin_loss", "aten::kl_div"}


def inlined_graph(model):
    """The model's forward graph with every submodule call inlined (the inliner leaves method
    calls alone while the graph executor's optimizations are off, as main turns them)."""
    graph = model.graph
    optimize = torch._C._get_graph_executor_optimize()
    torch._C._set_graph_executor_optimize(True)
    torch._C._jit_pass_inline(graph)
    torch._C._set_graph_executor_optimize(optimize)
    return graph


def cast_inputs(model, pick, cast, extra):
    """Passes every tensor input of the nodes `pick` selects in the model's inlined forward
    through the operator `cast` with the further arguments extra(graph) (made at the insertion
    point), unless it comes out of one already; returns how many nodes changed (nnsc's
    castInputs in Runtime/Program.cpp)."""
    graph = inlined_graph(model)

    def rewrite(block):
        changed = 0
        for node in list(block.nodes()):
            for inner in node.blocks():
                changed += rewrite(inner)
            if not pick(node):
                continue
            any_input = False
            for i, value in enumerate(list(node.inputs())):
                if value.type().kind() != "TensorType" or value.node().kind() == cast:
                    continue
                with graph.insert_point_guard(node):
                    made = graph.insertNode(graph.create(cast, [value] + extra(graph)))
                    made.output().setType(value.type())
                node.replaceInput(i, made.output())
                any_input = True
            changed += any_input
        return changed

    return rewrite(graph.block())


def compute_losses_in_float32(model):
    """precision.loss_dtype fp32, as nnsc's Program::computeLossesInFloat32: every tensor input
    of a loss operator, and of a log_softmax that feeds only losses, goes through
    aten::_autocast_to_full_precision (bf16/fp16 -> float32, anything else as is)."""
    def loss_input(node):
        if node.kind() in LOSS_OPS:
            return True
        uses = node.output().uses() if node.outputsSize() == 1 else []
        return (node.kind() in ("aten::log_softmax", "aten::_log_softmax") and uses
                and all(u.user.kind() in LOSS_OPS for u in uses))

    return cast_inputs(model, loss_input, "aten::_autocast_to_full_precision",
                       lambda g: [g.insertConstant(True)] * 2)


LOW_PRECISION_OPS = {
    "aten::linear", "aten::matmul", "aten::mm", "aten::bmm", "aten::mv", "aten::addmm",
    "aten::addbmm", "aten::baddbmm", "aten::addmv", "aten::addr", "aten::conv1d", "aten::conv2d",
    "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::convolution", "aten::_convolution", "aten::prelu",
    "aten::scaled_dot_product_attention", "aten::conv_tbc"}


AUTOCAST_FLOAT32_OPS = LOSS_OPS | {
    "aten::acos", "aten::asin", "aten::cosh", "aten::erfinv", "aten::exp", "aten::expm1",
    "aten::log", "aten::log10", "aten::log2", "aten::log1p", "aten::reciprocal", "aten::rsqrt",
    "aten::sinh", "aten::tan", "aten::pow", "aten::softplus", "aten::layer_norm",
    "aten::native_layer_norm", "aten::group_norm", "aten::frobenius_norm", "aten::nuclear_norm",
    "aten::norm", "aten::cosine_similarity", "aten::poisson_nll_loss",
    "aten::cosine_embedding_loss", "aten::hinge_embedding_loss", "aten::margin_ranking_loss",
    "aten::multilabel_margin_loss", "aten::triplet_margin_loss", "aten::multi_margin_loss",
    "aten::dist", "aten::pdist", "aten::cdist", "aten::renorm", "aten::logsumexp", "aten::prod",
    "aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax",
    "aten::cumprod", "aten::cumsum", "aten::sum", "aten::linalg_vector_norm",
    "aten::linalg_matrix_norm"}


def compute_autocast_float32_ops(model):
    """precision.recipe autocast, as nnsc's Program::computeAutocastFloat32Ops: every tensor
    input of the operators CUDA autocast runs in float32 goes through
    aten::_autocast_to_full_precision."""
    return cast_inputs(model, lambda node: node.kind() in AUTOCAST_FLOAT32_OPS,
                       "aten::_autocast_to_full_precision",
                       lambda g: [g.insertConstant(True)] * 2)


def compute_matmuls_in(model, dtype):
    """Mixed precision's 16-bit matmuls, as nnsc's Program::computeMatmulsIn: every tensor input
    of the ops autocast runs in its lower precision goes through
    aten::_autocast_to_reduced_precision (float32 -> dtype, anything else as is)."""
    return cast_inputs(model, lambda node: node.kind() in LOW_PRECISION_OPS,
                       "aten::_autocast_to_reduced_precision",
                       lambda g: [g.insertConstant(True)] * 2 + [g.insertConstant(dtype)] * 2)


def train_mixed(args, model, mp, optimizer, make_batch, accum, mbs, log, opt, sched, steps):
    """The training loop under precision.mode bf16 | fp16 (no buffer-writing models)."""
    for step in range(steps):
        lr = lr_at(step, opt, sched)
        for group in optimizer.param_groups:
            group["lr"] = lr
        losses = []
        per_copy = [[None] * len(mp.params) for _ in range(args.dp)]
        scale = mp.loss_scale()
        for micro in range(accum):
            for rank in range(args.dp):
                first = ((step * accum + micro) * args.dp + rank) * mbs
                out = model(*[mp.input(t) for t in make_batch(range(first, first + mbs))])
                loss = out[0] if isinstance(out, tuple) else out
                scaled = loss * scale if scale != 1 else loss
                (scaled / accum if accum > 1 else scaled).backward()
                mp.copy_grads(per_copy[rank])
                losses.append(loss.item())
        mp.reduce_copies(per_copy)
        record = {"step": step + 1, "loss": sum(losses) / len(losses), "lr": lr}
        if mp.unscale():
            mp.scaler.update(True)
            for m in mp.masters:
                m.grad = None
            record.update(grad_norm=None, skipped=True, loss_scale=scale)
        else:
            clip = opt.get("grad_clip", 0.0) or 0.0
            norm = torch.nn.utils.clip_grad_norm_(mp.masters, clip if clip > 0 else float("inf"))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            mp.copy_masters()
            if mp.scaler:
                mp.scaler.update(False)
                record["loss_scale"] = scale
            record["grad_norm"] = float(norm)
        log.write(json.dumps(record) + "\n")
    torch.save(mp.state_dict(model), os.path.join(args.out, "final.pt"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--model", required=True)
    ap.add_argument("--dp", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--inputs", help="inputs.yaml of the export: B and T when the config leaves them 0")
    ap.add_argument("--float64", action="store_true", help="train in double precision")
    ap.add_argument("--float32", action="store_true",
                    help="ignore the config's precision section: plain float32 training")
    args = ap.parse_args()
    cfg = yaml.safe_load(open(args.config))
    data, train, opt = cfg["data"], cfg["train"], cfg["optimizer"]
    sched = cfg.get("lr_schedule", {"name": "constant"})
    seed = cfg.get("seed", 0)
    STEPS[0] = train["steps"]
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    # TorchScript's TensorExpr fuser (on by default in 2.x) can spin forever in
    # backward() of a loaded module; the reference needs plain eager kernels.
    torch._C._jit_set_texpr_fuser_enabled(False)
    model = torch.jit.load(args.model)
    if args.float64:
        model = model.double()
    elif args.float32:
        model = model.float()
    precision = cfg.get("precision", {}) or {}
    mp = None
    if (precision.get("recipe", "megatron") == "autocast"
            and precision.get("mode", "fp32") != "fp32" and not (args.float64 or args.float32)):
        torch._C._set_graph_executor_optimize(False)
        compute_matmuls_in(model, torch.bfloat16)
        compute_autocast_float32_ops(model)
    elif precision.get("mode", "fp32") != "fp32" and not (args.float64 or args.float32):
        # TorchScript's profiling executor rewrites the graph from the second call on (fused
        # differentiable subgraphs, other backward formulas); nnsc-run turns it off. In float32
        # that moves results by rounding only; in bf16 a rounding flip is a whole ulp (2^-8),
        # so the recipe is compared with the same plain executor.
        torch._C._set_graph_executor_optimize(False)
        mp = MixedPrecision(model, precision)
        compute_matmuls_in(model, {"bf16": torch.bfloat16, "fp16": torch.float16}[precision["mode"]])
        if precision.get("loss_dtype", "fp32") == "fp32":
            compute_losses_in_float32(model)
    optimizer = make_optimizer(model, opt, mp.masters if mp else None)
    specs = yaml.safe_load(open(args.inputs))["inputs"] if args.inputs else []
    shape = specs[0]["shape"] if specs else [0, 0]
    mbs = train.get("micro_batch_size", 0) or shape[0]
    if data.get("kind", "tokens") == "tensors":
        tensors = read_safetensors(data["train"])
        names = [spec["name"] for spec in specs]
        make_batch = lambda gs: tuple(
            t.double() if args.float64 and t.is_floating_point() else t
            for t in tensor_batch(tensors, names, seed, gs))
    else:
        tokens = load_tokens(data["train"], data.get("dtype", "uint16"))
        block = data.get("block_size", 0) or shape[1]
        make_batch = lambda gs: batch(tokens, block, seed, gs)
    accum = train.get("grad_accumulation", 1)
    buffers = DataParallelBuffers(model, cfg.get("data_parallel", {}).get("buffers", "broadcast"))
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "losses.jsonl"), "w")
    if mp:
        return train_mixed(args, model, mp, optimizer, make_batch, accum, mbs, log, opt, sched,
                           train["steps"])
    for step in range(train["steps"]):
        lr = lr_at(step, opt, sched)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        losses = []
        for micro in range(accum):
            buffers.start()
            for rank in range(args.dp):
                buffers.before_copy()
                first = ((step * accum + micro) * args.dp + rank) * mbs
                out = model(*make_batch(range(first, first + mbs)))
                buffers.after_copy()
                loss = out[0] if isinstance(out, tuple) else out
                (loss / (accum * args.dp)).backward()
                losses.append(loss.item())
            buffers.finish()
        clip = opt.get("grad_clip", 0.0) or 0.0
        params = [p for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, clip if clip > 0 else float("inf"))
        optimizer.step()
        log.write(json.dumps({"step": step + 1, "loss": sum(losses) / len(losses), "lr": lr,
                              "grad_norm": float(norm)}) + "\n")
    torch.save(model.state_dict(), os.path.join(args.out, "final.pt"))


if __name__ == "__main__":
    main()
