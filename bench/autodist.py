"""autodist's search time and plan quality (docs/autodist.md), on this machine, no GPU.

  /usr/bin/python3 bench/autodist.py [--bin build/bin] [--work out/bench-autodist]

1. Search time, the depth series: Llama-3-8B shapes at 8K tokens (meta export, explicit
   attention) with 8, 32 and 80 layers on 8 H100s (configs/clusters/h100-sxm.yaml), one copy of 8
   devices with every layer recomputed (one configuration), then everything automatic (devices per
   copy, ZeRO, recompute), with the repeated layers solved once (the default) and, as the
   baseline of the same invocation, with every layer searched on its own (--solve-each-layer).
   Prints each wall time (the fastest of 3 runs; the baseline runs once), the search time
   autodist reports, and the 80-layer / 8-layer ratios.
2. Quality, the same cost model both sides: autodist's predicted time per sample against every
   Megatron configuration (the model's megatron.yaml at tp 1, 2, 4, 8, dp = 8 / tp, ZeRO 0/1,
   recompute none/all) that fits the same limit, for the 8-layer and 32-layer Llama models and
   for GPT-3 1.3B, 2.6B and 6.7B (Alpa's suite shapes: nanoGPT's gpt3-* configs, sequence 1024,
   micro-batch 8 per copy).

3. Search time, long and wide (--part long): Llama-3-8B at 128K tokens on 8 H100s with 80 GB
   each (SDPA with is_causal: a graph traced on PyTorch 2.x, --graph-128k), and Llama-3-70B at
   8K on 16 GPUs (two nodes of 8 H100s; 16 MI300X without and with pipeline stages).

  --part time|long|quality|gpt3 runs one part only (gpt3: the GPT-3 rows of part 2).
"""
import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import PY, ROOT, sh  # noqa: E402

CLUSTER = f"{ROOT}/configs/clusters/h100-sxm.yaml"


def export(b, d, layers, example="llama", config="8b"):
    if not os.path.exists(f"{d}/graph.pb"):
        os.makedirs(d, exist_ok=True)
        cmd = [PY, f"{ROOT}/examples/{example}/export.py", "--config", config, "--meta",
               "--attention", "explicit", "--out", d]
        if layers:
            cmd += ["--layers", str(layers)]
        sh(cmd)
        sh([f"{b}/nnsc-trace", f"{d}/model.pt", "--inputs", f"{d}/inputs.yaml", "-o", d])
    return f"{d}/graph.pb"


def autodist(b, graph, extra, ngpus=8, cluster=CLUSTER):
    """(wall seconds, the chosen row or the error, the output)."""
    t0 = time.monotonic()
    try:
        out = sh([f"{b}/nnsc-plan", graph, "--policy", "autodist", "--runtime-ngpus", str(ngpus),
                  "--cluster", cluster, "-o", f"{os.path.dirname(graph)}/autodist.pb"] + extra)
    except SystemExit as e:
        err = next((l for l in str(e).splitlines() if l.startswith("error:")), str(e))
        return time.monotonic() - t0, err, "", float("nan")
    wall = time.monotonic() - t0
    chosen = next(l for l in out.splitlines() if l.startswith("*"))
    searched = float(re.search(r"configurations in ([0-9.]+) s", out).group(1))
    return wall, chosen, out, searched


def per_sample(row):
    """The per-sample time of a report row: its second time (step, then per sample)."""
    times = re.findall(r"([0-9.]+) (s|ms|us)\b", row)
    return seconds(" ".join(times[1]))


def seconds(text):
    v, unit = text.split()
    return float(v) * {"s": 1, "ms": 1e-3, "us": 1e-6}[unit]


def megatron(b, graph, tp, zero, recompute, example="llama", block="TransformerBlock"):
    cmd = [f"{b}/nnsc-plan", graph, "--policy", "file", "--plan-file",
           f"{ROOT}/examples/{example}/megatron.yaml", "--plan-ngpus", str(tp), "--runtime-ngpus",
           "8", "--cluster", CLUSTER, "--zero", str(zero), "-o", f"{os.path.dirname(graph)}/m.pb",
           "--print"]
    if recompute:
        cmd += ["--recompute-modules", block]
    out = sh(cmd)
    step = seconds(re.search(r"predicted step time: ([0-9.]+ \w+)", out).group(1))
    totals = [float(x) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "B": 1}[u]
              for x, u in re.findall(r"; total ([0-9.]+) (\w+) of", out)]
    return step, max(totals)


def quality(b, label, g, example, block, each=True):
    """autodist against the Megatron grid on one graph; returns autodist / best."""
    limit = 0.8 * 80e9  # 80 % of the H100 spec's memory_bytes (74.5 GiB): 59.6 GiB
    wall, chosen, out, _ = autodist(b, g, [])
    if not chosen.startswith("*"):
        print(f"-- {label}: autodist failed: {chosen}")
        return None
    per = per_sample(chosen)
    print(f"-- {label}: autodist ({wall:.1f} s) {chosen[1:].strip()}")
    if each:
        _, ech, _, _ = autodist(b, g, ["--solve-each-layer"])
        per_each = per_sample(ech)
        print(f"   autodist --solve-each-layer: {per_each * 1e3:.2f} ms/sample; layers solved once "
              f"/ each layer = {per / per_each:.3f}")
    best = None
    for tp in (1, 2, 4, 8):
        for zero in (0, 1):
            for rc in (False, True):
                try:
                    step, mem = megatron(b, g, tp, zero, rc, example, block)
                except SystemExit as e:
                    print(f"   megatron tp {tp} dp {8 // tp} zero {zero} recompute "
                          f"{'all' if rc else 'none'}: failed: {str(e).splitlines()[0]}")
                    continue
                fits = mem <= limit
                ps = step / (8 // tp)
                if fits and (best is None or ps < best[0]):
                    best = (ps, tp, zero, rc)
                print(f"   megatron tp {tp} dp {8 // tp} zero {zero} recompute "
                      f"{'all ' if rc else 'none'}: {ps * 1e3:9.2f} ms/sample, "
                      f"{mem / 2**30:7.1f} GiB {'fits' if fits else 'over'}")
    if not best:
        print(f"   no hand configuration fits; autodist {per * 1e3:.2f} ms/sample")
        return None
    print(f"   best hand grid: {best[0] * 1e3:.2f} ms/sample (tp {best[1]}, zero {best[2]}, "
          f"recompute {'all' if best[3] else 'none'}); autodist {per * 1e3:.2f} ms/sample; "
          f"ratio autodist / best = {per / best[0]:.3f}")
    return per / best[0]


def long_and_wide(b, work, graph_128k):
    """Search time of the two large targets: Llama-3-8B at 128K tokens on 8 H100s (80 GB each)
    and Llama-3-70B at 8K on 16 GPUs (two nodes of H100s; 16 MI300X, with and without
    pipelines)."""
    print("\n== search time, long and wide (this 2-core VM): wall (search)")
    if not graph_128k:
        d = f"{work}/llama8b-128k"
        graph_128k = f"{d}/graph.pb"
        if not os.path.exists(graph_128k):
            try:
                import torch.nn.functional as F
                has_sdpa = hasattr(F, "scaled_dot_product_attention")
            except ImportError:
                has_sdpa = False
            if not has_sdpa:
                print("-- Llama-3-8B 128K: skipped: needs SDPA (PyTorch 2.x) to export; trace it "
                      "under scripts/debian13.sh and pass --graph-128k (docs/autodist.md)")
                graph_128k = None
            else:
                os.makedirs(d, exist_ok=True)
                sh([PY, f"{ROOT}/examples/llama/export.py", "--config", "8b-128k", "--meta",
                    "--attention", "sdpa", "--out", d])
                sh([f"{b}/nnsc-trace", f"{d}/model.pt", "--inputs", f"{d}/inputs.yaml", "-o", d])
    rows = []
    if graph_128k:
        rows.append(("Llama-3-8B 128K, 8 x H100, 80 GB", graph_128k, 8, CLUSTER,
                     ["--mem-limit", "80GB"]))
    g70 = export(b, f"{work}/l70", None, "llama", "70b")
    mi300 = f"{ROOT}/configs/clusters/mi300x.yaml"
    rows += [("Llama-3-70B 8K, 16 x H100 (2 nodes)", g70, 16, CLUSTER, []),
             ("Llama-3-70B 8K, 16 x MI300X (2 nodes)", g70, 16, mi300, []),
             ("Llama-3-70B 8K, 16 x MI300X, --pipeline auto, global batch 128", g70, 16, mi300,
              ["--pipeline", "auto", "--global-batch", "128"])]
    for label, g, n, cluster, extra in rows:
        wall, chosen, out, searched = autodist(b, g, extra, n, cluster)
        what = ' '.join(chosen.split()[1:7]) + " ... " + ' '.join(chosen.split()[-4:]) \
            if chosen.startswith('*') else chosen[:160]
        memory = re.search(r"predicted step [0-9.]+ \w+, ([0-9.]+ \w+) per device", out)
        print(f"{label:<64} {wall:7.2f} s ({searched:6.2f} s)  "
              f"{'chosen ' + what if chosen.startswith('*') else what}"
              f"{'; ' + memory.group(1) + ' per device' if memory else ''}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=f"{ROOT}/build/bin")
    ap.add_argument("--work", default=f"{ROOT}/out/bench-autodist")
    ap.add_argument("--part", choices=["all", "time", "long", "quality", "gpt3"], default="all")
    ap.add_argument("--graph-128k", help="Llama-3-8B 128K traced on PyTorch 2.x (SDPA; "
                    "exported here when this torch has it)")
    args = ap.parse_args()
    if args.part in ("all", "time", "quality"):
        graphs = {n: export(args.bin, f"{args.work}/llama8b-{n}l", n) for n in (8, 32, 80)}

    if args.part in ("all", "time"):
        print("== search time (Llama-3-8B shapes, 8K tokens, 8 x H100; this 2-core VM): wall "
              "(search)")
        print(f"{'layers':>6}  {'one config (tp 8, recompute all)':>34}  {'automatic':>18}  "
              f"{'automatic, each layer':>22}")
        times = {}
        def best_of(runs, *a):
            """The fastest of `runs` runs (a timing's noise is all upward)."""
            return min((autodist(args.bin, *a) for _ in range(runs)), key=lambda r: r[0])

        for n, g in graphs.items():
            one, _, _, one_s = best_of(3, g, ["--plan-ngpus", "8", "--recompute",
                                              "TransformerBlock"])
            full, chosen, _, full_s = best_of(3, g, [])
            each, _, _, each_s = autodist(args.bin, g, ["--solve-each-layer"])
            times[n] = (one, full, one_s)
            what = ' '.join(chosen.split()[1:7]) if chosen.startswith('*') else chosen[:110]
            print(f"{n:>6}  {one:>22.2f} s ({one_s:5.2f} s)  {full:>8.2f} s ({full_s:5.2f} s)  "
                  f"{each:>12.2f} s ({each_s:5.2f} s)   chosen: {what}")
        print(f"80 / 8 layers: {times[80][0] / times[8][0]:.2f}x wall, "
              f"{times[80][2] / times[8][2]:.2f}x search (one config); "
              f"{times[80][1] / times[8][1]:.2f}x wall (automatic)")

    if args.part in ("all", "long"):
        long_and_wide(args.bin, args.work, args.graph_128k)

    if args.part in ("all", "quality", "gpt3"):
        print("\n== quality: predicted seconds per sample (step / copies), same cost model, "
              "8 x H100")
        ratios = {}
        if args.part != "gpt3":
            for n in (8, 32):
                ratios[f"Llama-3-8B {n} layers"] = quality(
                    args.bin, f"Llama-3-8B, {n} layers, 8K", graphs[n], "llama", "TransformerBlock")
        for size in ("1.3b", "2.6b", "6.7b"):
            g = export(args.bin, f"{args.work}/gpt3-{size}", None, "nanogpt", f"gpt3-{size}")
            ratios[f"GPT-3 {size.upper()}"] = quality(args.bin, f"GPT-3 {size.upper()}", g,
                                                      "nanogpt", "Block", each=False)
        print("\nautodist / best hand grid: " + ", ".join(
            f"{k} {v:.3f}" if v else f"{k} -" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
