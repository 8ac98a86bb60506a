"""export.py OUTDIR [NAME...]: the op zoo, small models that together call most of the op
library's operators (lib/Ops/rules/*.cpp), one family per model.

Each model is exported to OUTDIR/NAME/{model.pt, inputs.yaml} with torch.jit.trace (as the
examples are, see examples/export_common.py); its forward returns a 0-dim loss first. The golden
test opzoo.test traces each on meta and on the CPU and compares the two graphs. Only operators
that exist in torch 1.13 and 2.x are used, on tiny shapes, with fixed seeds.

conv and metagaps hold the operators that first traced wrongly on meta (no Meta kernel for an
out= form the functional one calls, convolution_overrideable, one_hot on 1.13): see
lib/Trace/MetaStandIns.cpp.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "..", "examples"))
from export_common import export, seed_everything  # noqa: E402


def total(*terms):
    """The loss: the sum of the means of every term, as float32."""
    loss = terms[0].float().mean()
    for t in terms[1:]:
        loss = loss + t.float().mean()
    return loss


class Unary(nn.Module):
    """Unary math and activations, functional and in-place."""

    def forward(self, x):
        p = x * x + 1.0  # positive
        u = x.clamp(-0.5, 0.5)  # inside (-1, 1)
        math = [x.neg(), x.exp(), x.exp2(), x.expm1(), p.log(), p.log2(), p.log10(),
                (x * x).log1p(), p.sqrt(), p.rsqrt(), x.square(), p.reciprocal(), x.sign(),
                x.sgn(), x.ceil(), x.floor(), x.round(), x.trunc(), x.frac(), x.sin(), x.cos(),
                x.tan(), u.asin(), u.acos(), x.atan(), x.sinh(), x.cosh(), x.tanh(), x.erf(),
                x.erfc(), u.erfinv(), x.nan_to_num(), x.positive()]
        act = [F.relu(x), F.relu6(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x),
               torch.sigmoid(x), F.softplus(x), F.mish(x), F.elu(x), F.selu(x), F.celu(x),
               F.leaky_relu(x, 0.1), F.hardtanh(x), F.hardswish(x), F.hardsigmoid(x),
               F.logsigmoid(x), F.threshold(x, 0.1, 0.0)]
        y = x.clone()
        y.mul_(2.0)
        y.relu_()
        y.sigmoid_()
        z = x.detach().contiguous()
        return total(*math, *act, y, z), x.tanh()


class Binary(nn.Module):
    """Broadcasting arithmetic between tensors and with scalars."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x, y):
        p = y * y + 1.0
        ops = [x + y, x + self.w, x - y, 1.0 - x, x * y, x * 3.0, x / p, torch.true_divide(x, p),
               x ** 2, torch.pow(p, x), torch.float_power(p, 2.0), torch.atan2(x, p),
               torch.hypot(x, y), torch.copysign(x, y), torch.xlogy(p, p), torch.lerp(x, y, 0.3),
               torch.addcmul(x, y, p, value=0.5), torch.addcdiv(x, y, p, value=0.5),
               torch.maximum(x, y), torch.minimum(x, y), torch.fmax(x, y), torch.fmin(x, y),
               torch.max(x, y), torch.min(x, y), x.clamp(min=-0.2), x.clamp_min(0.1),
               x.clamp_max(0.1), torch.clip(x, -0.3, 0.3), torch.remainder(x, p),
               torch.fmod(x, p), torch.floor_divide(x, p), torch.rsub(x, y)]
        z = x.clone()
        z.add_(y)
        z.sub_(self.w, alpha=2.0)
        z.div_(p)
        z.clamp_(-1.0, 1.0)
        return total(*ops, z)


class Compare(nn.Module):
    """Comparisons, logic, where and masked_fill."""

    def forward(self, x, y, k):
        cmp = [x == y, x != y, x < y, x > y, x <= y, x >= 0.0, torch.greater(x, y),
               torch.greater_equal(x, y), torch.less(x, y), torch.less_equal(x, y),
               torch.not_equal(x, y), torch.eq(x, 0.5)]
        a, b = x > 0, y > 0
        logic = [a & b, a | b, a ^ b, torch.bitwise_and(k, 3),
                 torch.bitwise_or(k, 4), torch.bitwise_xor(k, k), torch.bitwise_not(k),
                 torch.isnan(x)]
        w = torch.where(a, x, y)
        m = x.masked_fill(b, 0.0)
        n = x.clone()
        n.masked_fill_(a, 1.0)
        return total(*cmp, *logic, w, m, n, (x > 2.0).any(dim=1), (x < 2.0).all(dim=0))


class Reduce(nn.Module):
    """Reductions and ops along one dim (softmax, cumsum, sort, topk)."""

    def forward(self, x):
        red = [x.sum(), x.sum(dim=1), x.sum(dim=(0, 2), keepdim=True), x.nansum(dim=1),
               x.mean(dim=-1), x.mean(), x.nanmean(dim=0), x.prod(dim=1), x.amax(dim=-1),
               x.amin(dim=(1, 2)), x.argmax(dim=1), x.argmin(dim=-1), x.var(dim=1),
               x.std(dim=-1, unbiased=False), x.norm(dim=-1), x.norm(),
               torch.linalg.vector_norm(x, ord=2, dim=-1), x.logsumexp(dim=-1), x.max(), x.min()]
        vmax, imax = x.max(dim=1)
        vmin, imin = x.min(dim=-1, keepdim=True)
        mn, mx = torch.aminmax(x, dim=0)
        v, m = torch.var_mean(x, dim=1)
        s, m2 = torch.std_mean(x, dim=-1)
        along = [x.cumsum(dim=1), x.cumprod(dim=-1), x.logcumsumexp(dim=0),
                 x.cummax(dim=1)[0], x.cummin(dim=2)[1], x.sort(dim=-1)[0],
                 x.argsort(dim=1, descending=True), x.topk(2, dim=-1)[0],
                 F.softmax(x, dim=-1), F.log_softmax(x, dim=1)]
        return total(*red, vmax, imax, vmin, imin, mn, mx, v, m, s, m2, *along)


class Shape(nn.Module):
    """Views, permutations, split and cat families, indexing."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.register_buffer("pos", torch.arange(6))
        self.register_buffer("cols", torch.tensor([0, 2]))

    def forward(self, x, ids, idx):
        # x: [2, 3, 4]; ids: [2, 5] in [0, 10); idx: [2, 3, 4] in [0, 3)
        views = [x.view(6, 4), x.reshape(2, 12), x.flatten(1), x.flatten(),
                 x.view(6, 4).unflatten(0, (3, 2)), x.reshape(2, 12).view_as(x),
                 x.view(24).reshape_as(x), x.permute(2, 0, 1), x.transpose(0, 2),
                 torch.swapaxes(x, 1, 2), x[0].t(), x.unsqueeze(1), x.unsqueeze(-1).squeeze(-1),
                 x[:, :1].squeeze(1), x.unsqueeze(0).squeeze(), x[:, :, :1].expand(2, 3, 5),
                 x[:1].expand_as(x), torch.broadcast_to(x[:, :1], (2, 3, 4)), x.repeat(1, 2, 1)]
        a, b = x.split(2, dim=-1)
        c, d, e = x.split([1, 1, 2], dim=-1)
        f, g = x.chunk(2, dim=2)
        h, i = torch.tensor_split(x, 2, dim=1)
        us = torch.unsafe_split(x, 2, dim=-1) + torch.unsafe_chunk(x, 3, dim=1)
        j, k = x.unbind(0)
        bx, by = torch.broadcast_tensors(x[:, :1], x[:1])
        joined = [torch.cat([a, b], dim=-1), torch.cat((c, d, e), 2), torch.concat([f, g], -1),
                  torch.stack([j, k]), torch.stack([j, k], dim=-1), h, i, bx, by, *us]
        index = [x[:, 1:3], x[..., ::2], x[1], x[:, -1], x.narrow(2, 1, 2),
                 torch.narrow_copy(x, 1, 0, 2), x.index_select(1, self.cols), x.gather(1, idx),
                 x[0].tril(), x.triu(1), x.flip(0), x.flip((1, 2)), x.roll(1, 2), x.roll(2)]
        t = x.clone()
        t.tril_()
        emb = self.emb(ids)
        pos = self.emb(self.pos)
        return total(*views, *joined, *index, t, emb, pos)


class Linalg(nn.Module):
    """Matrix products and einsum."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 6)
        self.nobias = nn.Linear(8, 6, bias=False)
        self.w = nn.Parameter(torch.randn(6, 8))
        self.b = nn.Parameter(torch.randn(6))
        self.v = nn.Parameter(torch.randn(8))

    def forward(self, x, q, k):
        # x: [4, 8]; q, k: [2, 3, 8]
        ops = [self.fc(x), self.nobias(q), F.linear(x, self.w), torch.matmul(x, self.w.t()),
               q @ k.transpose(1, 2), q @ self.v, torch.mm(x, self.w.t()),
               torch.bmm(q, k.transpose(1, 2)), torch.addmm(self.b, x, self.w.t()),
               torch.baddbmm(q[:, :, :3], q, k.transpose(1, 2), alpha=0.5),
               torch.addmv(self.b, self.w, self.v), torch.outer(self.b, self.v),
               torch.ger(self.b, self.v), torch.dot(self.v, x[0]), torch.vdot(self.v, x[1]),
               torch.einsum("bij,bkj->bik", q, k), torch.einsum("ij,kj->ik", x, self.w),
               torch.einsum("bij->bj", q), torch.einsum("...j,j", q, self.v)]
        return total(*ops)


class Norm(nn.Module):
    """Normalisation layers and an RMSNorm built from pointwise ops."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)
        self.ln2 = nn.LayerNorm([4, 8], elementwise_affine=False)
        self.gn = nn.GroupNorm(2, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("var", torch.ones(4))
        self.rms = nn.Parameter(torch.ones(8))

    def forward(self, x, img):
        # x: [2, 4, 8]; img: [2, 4, 3, 3]
        rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.rms
        return total(self.ln(x), self.ln2(x), F.layer_norm(x, (8,)), self.gn(x), self.gn(img),
                     self.bn(x), F.batch_norm(img, self.mean, self.var, training=False), rms)


class Pool(nn.Module):
    """Pooling."""

    def forward(self, seq, img):
        # seq: [2, 3, 8]; img: [2, 3, 8, 8]
        vol = img.view(2, 3, 4, 4, 4)
        pooled, where = F.max_pool2d(img, 2, return_indices=True)
        return total(F.max_pool1d(seq, 2), F.max_pool2d(img, 2), pooled, where,
                     F.avg_pool1d(seq, 2), F.avg_pool2d(img, 2), F.adaptive_avg_pool1d(seq, 4),
                     F.adaptive_avg_pool2d(img, (2, 2)), F.adaptive_max_pool1d(seq, 4),
                     F.adaptive_max_pool2d(img, 2), F.max_pool3d(vol, 2), F.avg_pool3d(vol, 2),
                     F.adaptive_avg_pool3d(vol, 1))


class Conv(nn.Module):
    """Convolutions: aten::_convolution reaches convolution_overrideable on meta."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(3, 4, 3, padding=1)
        self.c2 = nn.Conv2d(3, 4, 3, stride=2, bias=False)
        self.dw = nn.Conv2d(3, 3, 3, groups=3)
        self.c3 = nn.Conv3d(2, 2, 1)

    def forward(self, seq, img):
        vol = img[:, :2].unsqueeze(2)
        return total(self.c1(seq), self.c2(img), self.dw(img), self.c3(vol),
                     F.conv1d(seq, self.c1.weight), F.conv2d(img, self.c2.weight, padding=1))


class MetaGaps(nn.Module):
    """Ops whose functional form calls an out= kernel that has no Meta kernel, and one_hot
    (1.13 refuses meta inputs)."""

    def forward(self, x, ids):
        # x: [4, 8]; ids: [4] in [0, 5)
        a, b = x > 0, x < 0.5
        return total(x.abs(), torch.isfinite(x), torch.isinf(x), torch.logical_and(a, b),
                     torch.logical_or(a, b), torch.logical_xor(a, b), torch.logical_not(a),
                     F.one_hot(ids, 5))


class Scatter(nn.Module):
    """Padding, scatters, index_add and interpolation."""

    def forward(self, x, idx, rows):
        # x: [4, 10]; idx: [4, 3] in [0, 10); rows: [3] in [0, 4)
        src = x[:, :3] * 2.0
        return total(F.pad(x, (1, 2)), F.pad(x, (0, 0, 2, 0), value=1.0),
                     F.pad(x.view(1, 4, 10), (2, 2), mode="reflect"),
                     F.pad(x.view(1, 1, 4, 10), (1, 1, 1, 1), mode="replicate"),
                     x.scatter(1, idx, src), x.scatter_add(1, idx, src),
                     x.index_add(0, rows, x[:3] * 0.5), x.index_fill(1, idx[0], -1.0),
                     F.interpolate(x.view(1, 4, 10), scale_factor=2.0, mode="nearest"),
                     F.interpolate(x.view(1, 1, 4, 10), size=(8, 5), mode="bilinear",
                                   align_corners=False))


class Loss(nn.Module):
    """Loss functions: each is a term of the returned loss."""

    def forward(self, logits, target, pred, ref):
        # logits: [4, 5]; target: [4] in [0, 5); pred, ref: [4, 6]
        prob = torch.sigmoid(pred)
        ref01 = torch.sigmoid(ref)
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits, target,
                                                                  reduction="sum")
                + F.cross_entropy(logits, target, reduction="none").mean()
                + F.nll_loss(F.log_softmax(logits, -1), target) + F.mse_loss(pred, ref)
                + F.l1_loss(pred, ref) + F.smooth_l1_loss(pred, ref)
                + F.huber_loss(pred, ref, delta=0.5) + F.binary_cross_entropy(prob, ref01)
                + F.binary_cross_entropy_with_logits(pred, ref01) + F.soft_margin_loss(pred, ref)
                + F.kl_div(F.log_softmax(pred, -1), F.softmax(ref, -1), reduction="batchmean")
                + F.mse_loss(pred, ref, reduction="none").sum())


class Create(nn.Module):
    """Creation ops, *_like, new_*, casts, in-place fills and dropout (train mode)."""

    def forward(self, x, n):
        # x: [3, 4] float; n: [3, 4] int64
        made = [torch.arange(4), torch.arange(1, 9, 2), torch.zeros(3, 4), torch.ones(2, 3),
                torch.full((2, 2), 7.0), torch.empty(3).fill_(1.0), torch.linspace(0, 1, 5),
                torch.logspace(0, 2, 3), torch.eye(3),
                torch.scalar_tensor(3.0), x.new_zeros(2, 4), x.new_ones(4), x.new_full((2,), 5.0),
                x.new_empty(3).zero_(), torch.rand(2, 2).zero_(), torch.randn(3).zero_(),
                torch.randint(0, 5, (3,)).zero_(), torch.randperm(4).zero_(),
                torch.empty_strided((2, 3), (1, 2)).zero_()]
        like = [torch.zeros_like(x), torch.ones_like(n), torch.full_like(x, 2.0),
                torch.empty_like(x).fill_(0.0), torch.rand_like(x), torch.randn_like(x)]
        casts = [x.to(torch.float64), n.float(), x.long(), x.type_as(n), x.to(n), x.half(),
                 n.to(torch.float32) + x, x.bool(), x.double().to(x)]
        drop = [F.dropout(x, 0.5, training=True), F.dropout(x, 0.5, training=False),
                F.dropout2d(x.view(1, 3, 2, 2), 0.5, training=True),
                F.alpha_dropout(x, 0.5, training=True),
                F.feature_alpha_dropout(x.view(1, 3, 4), 0.5, training=True)]
        y = x * 1.0
        y.fill_(2.0)
        y.zero_()
        tri = torch.ones(4, 4).tril() + torch.ones(4, 4).triu(1)
        return total(*made, *like, *casts, *drop, y, tri)


class Vision(nn.Module):
    """Ops of vision and MoE models: advanced indexing (a relative-position bias table, None
    entries, two index tensors), take_along_dim, roll, topk, stochastic depth, bernoulli,
    windows (unfold, F.unfold), repeat_interleave, a transposed convolution, group and instance norm, and writes
    into views (slice_scatter, select_scatter, index_put)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(9, 2))
        self.register_buffer("rel", torch.randint(0, 9, (4, 4)))
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.up = nn.ConvTranspose2d(4, 3, 2, stride=2)

    def forward(self, x, img, idx, ids):
        # x: [4, 8]; img: [2, 4, 4, 4]; idx: [4, 8] in [0, 4); ids: [3] in [0, 4)
        bias = self.table[self.rel.view(-1)].view(4, 4, 2)
        values, where = x.topk(3, dim=1)
        keep = x.new_empty(4, 1).bernoulli_(0.8)
        mask = x.new_zeros(4, 8)
        mask[1:3, 2:5] = 1.0
        mask[:, 0] = 2.0
        put = x.clone()
        put[ids] = x[:3] * 2.0
        return total(bias, x[ids], x[ids, ids], x[:, ids], img[:, :, ids],
                     torch.take_along_dim(x, idx, 1), values, where, x.roll(1, 0),
                     x / 0.8 * keep, torch.bernoulli(torch.sigmoid(x)), x.unfold(1, 2, 2),
                     F.unfold(img, 2, stride=2), self.up(img), self.gn(img), self.inorm(img),
                     mask, put, x.repeat_interleave(2, dim=1), x.repeat_interleave(2))


IMAGES = [("seq", [2, 3, 8], "float32", [-1, 1]), ("img", [2, 3, 8, 8], "float32", [-1, 1])]

# name: (model, [(input name, shape, dtype, range)])
MODELS = {
    "unary": (Unary, [("x", [4, 8], "float32", [-2, 2])]),
    "binary": (Binary, [("x", [4, 8], "float32", [-2, 2]), ("y", [4, 8], "float32", [-2, 2])]),
    "compare": (Compare, [("x", [4, 8], "float32", [-1, 1]), ("y", [4, 8], "float32", [-1, 1]),
                          ("k", [4, 8], "int64", [0, 16])]),
    "reduce": (Reduce, [("x", [2, 3, 4], "float32", [-1, 1])]),
    "shape": (Shape, [("x", [2, 3, 4], "float32", [-1, 1]), ("ids", [2, 5], "int64", [0, 10]),
                      ("idx", [2, 3, 4], "int64", [0, 3])]),
    "linalg": (Linalg, [("x", [4, 8], "float32", [-1, 1]), ("q", [2, 3, 8], "float32", [-1, 1]),
                        ("k", [2, 3, 8], "float32", [-1, 1])]),
    "norm": (Norm, [("x", [2, 4, 8], "float32", [-1, 1]),
                    ("img", [2, 4, 3, 3], "float32", [-1, 1])]),
    "pool": (Pool, IMAGES),
    "loss": (Loss, [("logits", [4, 5], "float32", [-1, 1]), ("target", [4], "int64", [0, 5]),
                    ("pred", [4, 6], "float32", [-1, 1]), ("ref", [4, 6], "float32", [-1, 1])]),
    "create": (Create, [("x", [3, 4], "float32", [-1, 1]), ("n", [3, 4], "int64", [0, 8])]),
    "conv": (Conv, IMAGES),
    "scatter": (Scatter, [("x", [4, 10], "float32", [-1, 1]), ("idx", [4, 3], "int64", [0, 10]),
                          ("rows", [3], "int64", [0, 4])]),
    "metagaps": (MetaGaps, [("x", [4, 8], "float32", [-1, 1]), ("ids", [4], "int64", [0, 5])]),
    "vision": (Vision, [("x", [4, 8], "float32", [-1, 1]), ("img", [2, 4, 4, 4], "float32", [-1, 1]),
                        ("idx", [4, 8], "int64", [0, 4]), ("ids", [3], "int64", [0, 4])]),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("names", nargs="*",
                   help="models to export (default: every model)")
    cli = p.parse_args()
    for name in cli.names or MODELS:
        cls, inputs = MODELS[name]
        seed_everything(0)
        specs = [dict(name=n, shape=s, dtype=d, range=r) for n, s, d, r in inputs]
        args = argparse.Namespace(out=os.path.join(cli.out, name), meta=False, eval=False,
                                  config=name)
        export(cls(), specs, args)


if __name__ == "__main__":
    main()
