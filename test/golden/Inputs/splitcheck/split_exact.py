"""split_exact.py WORKDIR: checks numerically that every split an op's annotation allows is exact.

Each case below is one operator called on fixed tensors. The cases are traced together (as
buffers of one module) with `nnsc-trace --device cpu --print` (on PATH); each case takes the
annotation the trace gave the next node of its op. For every identifier the annotation lets a
policy split (plain, not frozen, not a numeral, leading in its dim), the inputs are cut in two
along it (inputs without it stay whole), the op runs on each half, and the halves' outputs are
concatenated along it (summed for a `+` identifier; an output without it must come out the same
from both halves). The result must equal the whole op's (exactly; within 1e-6 for a sum).
A case whose op has local arguments (group counts, slice bounds) reads them from its local
shapes, as nnsc's LocalArgs rewrites them. Prints one line per case; exits 1 on a mismatch.
"""
import os
import re
import subprocess
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "examples"))
from export_common import export  # noqa: E402

aten = torch.ops.aten
g = torch.Generator().manual_seed(0)


def rnd(*shape):
    return torch.randn(*shape, generator=g)


def ints(high, *shape):
    return torch.randint(0, high, shape, generator=g)


# (op, callable over the node's tensor inputs in order, inputs)
CASES = [
    ("aten::index", lambda t, i: t[i], [rnd(9, 4), ints(9, 16)]),  # relative position bias
    ("aten::index", lambda x, i: aten.index(x, [None, i]), [rnd(4, 8), ints(8, 6)]),
    ("aten::index", lambda x, i, j: x[i, j], [rnd(4, 8, 2), ints(4, 6, 1), ints(8, 4)]),
    ("aten::index", lambda x, i, j: aten.index(x, [i, None, j]),
     [rnd(4, 6, 8), ints(4, 2), ints(8, 2)]),
    ("aten::index_select", lambda x, i: x.index_select(1, i), [rnd(4, 8), ints(8, 6)]),
    ("aten::gather", lambda x, i: x.gather(1, i), [rnd(4, 8), ints(8, 4, 6)]),
    ("aten::take_along_dim", lambda x, i: torch.take_along_dim(x, i, 1),
     [rnd(4, 8), ints(8, 4, 6)]),
    ("aten::roll", lambda x: x.roll(1, 0), [rnd(4, 6)]),
    ("aten::roll", lambda x: x.roll((1, 2), (1, 2)), [rnd(2, 4, 6)]),
    ("aten::topk", lambda x: x.topk(3, dim=1), [rnd(4, 8, 2)]),
    ("aten::sort", lambda x: x.sort(dim=-1), [rnd(4, 6)]),
    ("aten::max", lambda x: x.max(dim=1), [rnd(4, 6, 2)]),
    ("aten::argmax", lambda x: x.argmax(dim=0), [rnd(4, 6)]),
    ("aten::cumsum", lambda x: x.cumsum(1), [rnd(4, 6)]),
    ("aten::group_norm",
     lambda x, w, b: F.group_norm(x, x.shape[1] // 2, w, b), [rnd(2, 8, 3, 3), rnd(8), rnd(8)]),
    ("aten::instance_norm", lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
     [rnd(2, 4, 3, 3), rnd(4), rnd(4)]),
    ("aten::slice_scatter", lambda x, s: torch.slice_scatter(x, s, dim=1, start=1, end=3, step=1),
     [rnd(4, 6), rnd(4, 2)]),
    ("aten::slice_scatter",
     lambda x, s: torch.slice_scatter(x, s, dim=0, start=0, end=x.shape[0], step=1),
     [rnd(4, 6), rnd(4, 6)]),
    ("aten::select_scatter", lambda x, s: torch.select_scatter(x, s, 1, 2),
     [rnd(4, 6, 2), rnd(4, 2)]),
    ("aten::index_put", lambda x, i, v: aten.index_put(x, [i], v, True),
     [rnd(8, 6), ints(8, 5), rnd(5, 6)]),
    ("aten::index_put", lambda x, i, v: aten.index_put(x, [None, i], v),
     [rnd(4, 8), ints(8, 3), rnd(4, 3)]),
    ("aten::index_put", lambda x, m, v: aten.index_put(x, [m], v),
     [rnd(4, 6), rnd(4, 6) > 0, torch.tensor(2.0)]),
    ("aten::repeat_interleave", lambda x: x.repeat_interleave(2, dim=1), [rnd(4, 6)]),
    ("aten::unfold", lambda x: x.unfold(1, 2, 2), [rnd(4, 6)]),
    ("aten::im2col", lambda x: F.unfold(x, 2, stride=2), [rnd(2, 4, 4, 4)]),
    ("aten::_convolution", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
     [rnd(2, 4, 3, 3), rnd(4, 6, 2, 2), rnd(6)]),
    ("aten::_convolution", lambda x, w: F.conv_transpose2d(x, w, stride=2),
     [rnd(2, 4, 3, 3), rnd(4, 6, 2, 2)]),
    ("aten::one_hot", lambda i: F.one_hot(i, 5), [ints(5, 4, 2)]),
    ("aten::masked_fill", lambda x, m: x.masked_fill(m, 0.0), [rnd(4, 6), rnd(6) > 0]),
    ("aten::where", lambda c, x, y: torch.where(c, x, y), [rnd(4, 1) > 0, rnd(4, 6), rnd(6)]),
]


class Cases(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for k, (_, _, ins) in enumerate(CASES):
            for j, t in enumerate(ins):
                self.register_buffer("c%d_%d" % (k, j), t)

    def forward(self, x):
        loss = x.sum()
        for k, (_, fn, ins) in enumerate(CASES):
            out = fn(*[getattr(self, "c%d_%d" % (k, j)) for j in range(len(ins))])
            for o in out if isinstance(out, tuple) else (out,):
                loss = loss + o.float().sum()
        return loss


def annotations(print_text):
    """(op, annotation) of every node of `nnsc-trace --print`, in order."""
    nodes = []
    for line in print_text.splitlines():
        m = re.search(r"= (\w+::\w+)\(", line)
        if m:
            nodes.append([m.group(1), None])
        elif line.strip().startswith("anno:") and nodes:
            nodes[-1][1] = line.split("anno:", 1)[1].strip()
    return nodes


def parse(anno):
    """'a^ (b 4), c -> c b' -> ([[['a^'], ['b', '4']], ...], [...])."""
    def tensor(text):
        text = text.strip()
        if text in ("?", "()"):
            return None
        return [d.strip("()").split() for d in re.findall(r"\([^)]*\)|\S+", text)]
    lhs, rhs = anno.split("->")
    return [tensor(t) for t in lhs.split(",")], [tensor(t) for t in rhs.split(",")]


def splittable(ins):
    names = []
    for dims in filter(None, ins):
        for dim in dims:
            lead = dim[0].lstrip("+")
            if lead and lead[-1] != "^" and not lead.isdigit() and lead.rstrip("+") not in names:
                names.append(lead.rstrip("+"))
    frozen = {d.rstrip("^") for dims in filter(None, ins) for dim in dims for d in dim[1:]}
    return [n for n in names if n not in frozen]


def dim_of(dims, name):
    for k, dim in enumerate(dims or []):
        if dim[0].strip("+^") == name:
            return k
    return None


def check_split(fn, ins, anno, name):
    a_in, a_out = parse(anno)
    reduce = any(dim[0] == name + "+" for dims in filter(None, a_in) for dim in dims)
    halves = [[], []]
    for t, dims in zip(ins, a_in):
        k = dim_of(dims, name)
        addend = bool(dims) and dims[0][0].startswith("+")
        if reduce and addend:
            # Value-split: one half adds the whole addend, the other zeros.
            parts = (t, torch.zeros_like(t))
        else:
            parts = t.chunk(2, k) if k is not None else (t, t)
        for h in range(2):
            halves[h].append(parts[h])
    whole = fn(*ins)
    whole = whole if isinstance(whole, tuple) else (whole,)
    try:
        outs = [fn(*h) for h in halves]
    except (IndexError, RuntimeError) as e:
        return "a half fails: %s" % str(e).splitlines()[0]
    outs = [o if isinstance(o, tuple) else (o,) for o in outs]
    for i, (w, dims) in enumerate(zip(whole, a_out)):
        k = dim_of(dims, name)
        if reduce:
            got, exact = outs[0][i] + outs[1][i], False
        elif k is None:
            if not torch.equal(outs[0][i], outs[1][i]):
                return "output %d differs between the halves" % i
            got, exact = outs[0][i], True
        else:
            got, exact = torch.cat([outs[0][i], outs[1][i]], k), True
        ok = torch.equal(got, w) if exact else torch.allclose(got, w, atol=1e-6)
        if not ok:
            return "output %d differs from the whole op's" % i
    return None


def main():
    work = sys.argv[1]
    import argparse
    spec = [dict(name="x", shape=[2], dtype="float32", range=[-1, 1])]
    export(Cases(), spec, argparse.Namespace(out=work, meta=False, eval=False, config="cases"))
    text = subprocess.run(["nnsc-trace", os.path.join(work, "model.pt"), "--inputs",
                           os.path.join(work, "inputs.yaml"), "-o", os.path.join(work, "g"),
                           "--device", "cpu", "--print"], check=True, capture_output=True,
                          text=True).stdout
    nodes = annotations(text)
    failed = 0
    for op, fn, ins in CASES:
        while nodes and nodes[0][0] != op:
            nodes.pop(0)
        if not nodes:
            sys.exit("FAIL: no %s node left in the trace" % op)
        anno = nodes.pop(0)[1]
        if anno is None or anno == "replicate-only":
            print("FAIL: %s has no annotation" % op)
            failed += 1
            continue
        names = splittable(parse(anno)[0])
        errors = [(n, check_split(fn, ins, anno, n)) for n in names]
        bad = [(n, e) for n, e in errors if e]
        failed += bool(bad)
        print("%s %s: %s" % ("FAIL" if bad else "ok", op, anno) +
              "".join(" | split %s: %s" % (n, e) for n, e in bad) +
              ("" if bad else " | exact along: %s" % (" ".join(names) or "-")))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
