#!/usr/bin/env python3
"""Hostile-input corpus of the nnsc tools (test/hostile/README.md).

hostile.py --bin BUILD/bin --work DIR [--examples DIR] [--data FILE] [--python PY]
           [--filter SUBSTR] [-j N] [-v] [--list] [--prepare-only]

Prepares good artifacts once under WORK/good (a tiny MLP and a tiny nanoGPT
exported, traced and planned, the GPT's program for 2 data-parallel ranks,
tokenized text, a 2-step run with its checkpoint and the merged checkpoint),
then runs every case of test/hostile/cases/*.txt in WORK/cases/NAME (its
working directory), with a timeout (a hang fails), -j N at a time.

A case passes when the tool exits with the pinned code, its combined output
matches every `expect:` regex and no `reject:` regex, every `keep:` path is
byte-for-byte what it was before the run and every `absent:` path is absent.
Whatever the case says, it fails when the tool died from a signal or its
output shows an abort, a sanitizer or a Python traceback (BANNED below).
A case marked `xfail: REASON` is a known bug (test/hostile/FINDINGS.md):
reported XFAIL while it fails, and XPASS, a failure of the corpus, once it
passes (remove the mark then). Python 3 standard library only.
"""
import argparse
import ast
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import pbedit  # noqa: E402  (beside this file)

BANNED = [
    "terminate called", "Segmentation fault", "core dumped", "AddressSanitizer",
    "LeakSanitizer", "runtime error:", "Traceback (most recent call last)", "Aborted",
    "double free", "stack smashing",
]
DEFAULT_TIMEOUT = 60.0
SENTINEL = b"hostile-corpus sentinel: must survive a failing run\n"
# Launcher and MPI/Slurm variables a worker reads: a case runs as a fresh job.
LAUNCH_VARS = re.compile(r"^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|"
                         r"GROUP_RANK|ROLE_RANK|TORCHELASTIC_.*|OMPI_.*|PMI_.*|PMIX_.*|SLURM_.*)$")


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def write(path, data, mode="wb"):
    with open(path, mode) as f:
        f.write(data)


# ---------------------------------------------------------------- case files

class Case:
    def __init__(self, name, source):
        self.name = name
        self.source = source  # file:line
        self.cmd = None
        self.exit = None
        self.expect = []
        self.reject = []
        self.timeout = DEFAULT_TIMEOUT
        self.xfail = None
        self.keep = []
        self.absent = []
        self.env = {}
        self.unset = []
        self.setup = []  # (action, args...)
        self.signal = None  # (signal number, regex)
        self.rlimit_as = None
        self.group = None


def parse_cases(path):
    """Parses one case file: `=== NAME` starts a case, `key: value` lines
    follow; `file: PATH` takes the following lines indented by two spaces
    as the file's text."""
    cases = []
    group = os.path.splitext(os.path.basename(path))[0]
    lines = read(path, "rb").decode("utf-8").split("\n")
    case = None
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{os.path.relpath(path, ROOT)}:{i + 1}"
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("=== "):
            case = Case(line[4:].strip(), where)
            case.group = group
            cases.append(case)
            continue
        if case is None or ":" not in line or line.startswith(" "):
            raise SystemExit(f"{where}: error: expected '=== NAME' or 'key: value', got {line!r}")
        key, value = line.split(":", 1)
        key, value = key.strip(), value.strip()
        if key == "cmd":
            case.cmd = value
        elif key == "exit":
            case.exit = int(value)
        elif key == "expect":
            case.expect.append(value)
        elif key == "reject":
            case.reject.append(value)
        elif key == "timeout":
            case.timeout = float(value)
        elif key == "xfail":
            case.xfail = value
        elif key == "keep":
            case.keep.append(value)
        elif key == "absent":
            case.absent.append(value)
        elif key == "env":
            k, v = value.split("=", 1)
            case.env[k] = v
        elif key == "unset":
            case.unset.append(value)
        elif key == "rlimit-as":
            case.rlimit_as = int(value)
        elif key == "signal":
            sig, rest = value.split(None, 1)
            if not rest.startswith("after "):
                raise SystemExit(f"{where}: error: expected 'signal: SIG after REGEX'")
            case.signal = (getattr(signal, "SIG" + sig), rest[len("after "):])
        elif key == "file":
            body = []
            while i < len(lines) and (lines[i].startswith("  ") or lines[i] == ""):
                if lines[i] == "":
                    # a blank line ends the block unless more indented text follows
                    j = i
                    while j < len(lines) and lines[j] == "":
                        j += 1
                    if j >= len(lines) or not lines[j].startswith("  "):
                        break
                body.append(lines[i][2:])
                i += 1
            case.setup.append(("file", value, "\n".join(body) + "\n"))
        elif key in ("bytes", "copy", "mkdir", "rm", "truncate", "pb", "json", "st-header",
                     "append", "patch"):
            case.setup.append((key, value))
        else:
            raise SystemExit(f"{where}: error: unknown key '{key}'")
    for c in cases:
        if c.cmd is None or c.exit is None:
            raise SystemExit(f"{c.source}: error: case '{c.name}' needs cmd: and exit:")
        if not c.expect:
            raise SystemExit(f"{c.source}: error: case '{c.name}' needs at least one expect: regex")
    return cases


# ---------------------------------------------------------------- setup actions

def subst(text, names):
    return re.sub(r"@([a-z_0-9]+)@", lambda m: names.get(m.group(1), m.group(0)), text)


# What a `bytes:`, `patch:` or `append:` value may use: literals and these.
SAFE = {"__builtins__": {}, "chr": chr, "range": range, "bytes": bytes}


def snapshot(path):
    """Bytes of a file, or a sorted listing with contents of a directory tree."""
    if os.path.isdir(path):
        out = []
        for d, dirs, files in sorted(os.walk(path)):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(d, f)
                out.append((os.path.relpath(p, path), read(p)))
        return ("dir", tuple(out))
    if os.path.exists(path):
        return ("file", read(path))
    return ("missing", None)


def edit_safetensors(path, statement):
    blob = read(path)
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    names = sorted(k for k in header if k != "__metadata__")
    scope = {"h": header, "first": names[0], "names": names}
    exec(statement, {}, scope)
    text = json.dumps(scope["h"]).encode()
    text += b" " * (-len(text) % 8)
    write(path, struct.pack("<Q", len(text)) + text + blob[8 + n:])


def run_setup(case, names):
    for action in case.setup:
        kind = action[0]
        if kind == "file":
            path = subst(action[1], names)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write(path, subst(action[2], names).encode("utf-8"))
            continue
        arg = subst(action[1], names)
        if kind == "bytes":
            path, literal = arg.split(" = ", 1)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            data = eval(literal, dict(SAFE))  # a bytes literal, maybe repeated: b'..' * 4
            if isinstance(data, str):
                data = data.encode("utf-8")
            write(path, data)
        elif kind == "patch":
            lhs, literal = arg.split(" = ", 1)
            path, offset = lhs.rsplit(" ", 1)
            blob = bytearray(read(path))
            data = eval(literal, dict(SAFE))
            blob[int(offset):int(offset) + len(data)] = data
            write(path, bytes(blob))
        elif kind == "append":
            path, literal = arg.split(" = ", 1)
            write(path, eval(literal, dict(SAFE)), "ab")
        elif kind == "copy":
            src, dst = [s.strip() for s in arg.split(" -> ")]
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src):
                shutil.copytree(src, dst)
            else:
                shutil.copyfile(src, dst)
        elif kind == "mkdir":
            os.makedirs(arg, exist_ok=True)
        elif kind == "rm":
            if os.path.isdir(arg):
                shutil.rmtree(arg)
            else:
                os.remove(arg)
        elif kind == "truncate":
            path, n = arg.rsplit(" ", 1)
            blob = read(path)
            n = int(n)
            write(path, blob[:n] if n >= 0 else blob[:len(blob) + n])
        elif kind == "pb":
            path, edit = arg.split(" ", 1)
            field, op, value = edit.split(" ", 2)
            write(path, pbedit.edit(read(path), field, op, ast.literal_eval(value)))
        elif kind == "json":
            path, statement = arg.split(" ", 1)
            d = json.loads(read(path))
            scope = {"d": d}
            exec(statement, {}, scope)
            write(path, json.dumps(scope["d"], indent=1).encode())
        elif kind == "st-header":
            path, statement = arg.split(" ", 1)
            edit_safetensors(path, statement)


# ---------------------------------------------------------------- running

def proc_stats():
    """(pid, the fields of /proc/PID/stat after the command name) of every process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = read(f"/proc/{entry}/stat", "r")
        except OSError:
            continue
        yield int(entry), stat[stat.rfind(")") + 2:].split()


def children_of(pid):
    return sorted(p for p, fields in proc_stats() if int(fields[1]) == pid)


def group_members(pgid):
    """Live processes (not zombies) of process group pgid."""
    return [p for p, fields in proc_stats() if fields[0] != "Z" and int(fields[2]) == pgid]


def execute(argv, cwd, env, timeout, sig=None, rlimit_as=None):
    """Runs argv in its own session; returns (returncode or None on timeout,
    output, seconds, note). On a timeout the whole process group is killed."""
    if rlimit_as:
        # An address-space limit set by a tiny exec wrapper (no preexec_fn in
        # this multi-threaded driver); the launcher's workers inherit it.
        argv = [sys.executable, "-c",
                "import os, resource, sys; n = int(sys.argv[1]); "
                "resource.setrlimit(resource.RLIMIT_AS, (n, n)); os.execvp(sys.argv[2], sys.argv[2:])",
                str(rlimit_as)] + argv
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    chunks = []
    lock = threading.Lock()

    def reader():
        for raw in iter(lambda: proc.stdout.read1(65536), b""):
            with lock:
                chunks.append(raw)
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    note = ""
    sent = False
    deadline = start + timeout
    while True:
        try:
            proc.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            pass
        if sig and not sent:
            with lock:
                text = b"".join(chunks).decode("utf-8", "replace")
            if re.search(sig[1], text, re.M):
                kids = children_of(proc.pid)
                if kids:
                    os.kill(kids[-1], sig[0])
                    note = f"sent {signal.Signals(sig[0]).name} to worker {kids[-1]}"
                    sent = True
        if time.monotonic() > deadline:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            thread.join(5)
            proc.stdout.close()
            return None, b"".join(chunks).decode("utf-8", "replace"), time.monotonic() - start, note
    # A tool that exits leaves no process of its group running (a launcher
    # stops its workers); give them a moment, then name and kill the rest.
    for _ in range(40):
        left = group_members(proc.pid)
        if not left:
            break
        time.sleep(0.05)
    if left:
        note = f"left {len(left)} process(es) of its group running after it exited: {left[:5]}"
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    thread.join(10)
    proc.stdout.close()
    if sig and not sent:
        note = "the signal was never sent (its regex never matched)"
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), time.monotonic() - start, note


def case_env(args, case, names):
    env = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
    env["PATH"] = args.bin + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TMPDIR"] = names["case"] + "/tmp"
    env["LC_ALL"] = "C.UTF-8"
    for k, v in case.env.items():
        env[k] = subst(v, names)
    for k in case.unset:
        env.pop(k, None)
    return env


def run_case(args, case, base_names):
    names = dict(base_names)
    cdir = os.path.join(args.work, "cases", case.name)
    names["case"] = cdir
    if os.path.exists(cdir):
        shutil.rmtree(cdir)
    os.makedirs(cdir + "/tmp")
    problems = []
    try:
        run_setup(case, names)
    except Exception as e:  # a broken case, not a tool failure
        return case, "FAIL", [f"setup failed: {type(e).__name__}: {e}"], "", 0.0, None
    kept = {}
    for p in case.keep:
        path = subst(p, names)
        if path.endswith("/"):  # a directory: made holding a sentinel file, kept whole
            path = path.rstrip("/")
            if not os.path.exists(path):
                os.makedirs(path)
                write(os.path.join(path, "hostile-sentinel"), SENTINEL)
        elif not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write(path, SENTINEL)
        kept[path] = snapshot(path)
    argv = shlex.split(subst(case.cmd, {k: shlex.quote(v) for k, v in names.items()}))
    if argv[0].startswith("nnsc-"):
        argv[0] = os.path.join(args.bin, argv[0])
    rc, out, secs, note = execute(argv, cdir, case_env(args, case, names), case.timeout,
                                  case.signal, case.rlimit_as)
    if rc is None:
        problems.append(f"hang: no exit within {case.timeout:g} s (process group killed)")
    elif rc < 0:
        problems.append(f"died from signal {signal.Signals(-rc).name}")
    elif rc != case.exit:
        problems.append(f"exit code {rc}, expected {case.exit}")
    for word in BANNED:
        if word in out:
            problems.append(f"output shows '{word}'")
    for rx in case.expect:
        if not re.search(rx, out, re.M):
            problems.append(f"output does not match expect: {rx}")
    for rx in case.reject:
        if re.search(rx, out, re.M):
            problems.append(f"output matches reject: {rx}")
    for path, before in kept.items():
        after = snapshot(path)
        if after != before:
            what = "deleted" if after[0] == "missing" else "changed"
            problems.append(f"keep: {os.path.relpath(path, cdir)} was {what} by the failing run")
    for p in case.absent:
        path = subst(p, names)
        if os.path.exists(path):
            problems.append(f"absent: {os.path.relpath(path, cdir)} exists after the run")
    if note and not note.startswith("sent "):
        problems.append(note)
    if case.xfail:
        status = "XFAIL" if problems else "XPASS"
    else:
        status = "FAIL" if problems else "PASS"
    return case, status, problems, out, secs, rc


# ---------------------------------------------------------------- good artifacts

def prepare(args):
    """Builds the good inputs every case starts from; returns the placeholders."""
    g = os.path.join(args.work, "good")
    if os.path.exists(g):
        shutil.rmtree(g)
    os.makedirs(g)
    env = {k: v for k, v in os.environ.items() if not LAUNCH_VARS.match(k)}
    env["PATH"] = args.bin + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    log = open(os.path.join(g, "prepare.log"), "w")
    b = args.bin

    def step(*argv):
        print("+", " ".join(argv), file=log, flush=True)
        r = subprocess.run(list(argv), cwd=g, env=env, stdout=log, stderr=subprocess.STDOUT,
                           timeout=300)
        if r.returncode != 0:
            log.close()
            sys.stderr.write(read(os.path.join(g, "prepare.log"), "r")[-4000:])
            raise SystemExit(f"hostile: preparing the good artifacts failed: {' '.join(argv)} "
                             f"exited {r.returncode} (log: {g}/prepare.log)")

    ex = args.examples
    step(args.python, f"{ex}/mlp/export.py", "--config", "tiny", "--out", f"{g}/mlp")
    step(f"{b}/nnsc-trace", f"{g}/mlp/model.pt", "--inputs", f"{g}/mlp/inputs.yaml", "-o", f"{g}/mlp")
    step(f"{b}/nnsc-plan", f"{g}/mlp/graph.pb", "--policy", "tp", "--runtime-ngpus", "2",
         "-o", f"{g}/mlp/plan.pb")
    step(args.python, f"{ex}/nanogpt/export.py", "--config", "tiny", "--batch", "2",
         "--attention", "explicit", "--out", f"{g}/gpt")
    step(f"{b}/nnsc-trace", f"{g}/gpt/model.pt", "--inputs", f"{g}/gpt/inputs.yaml", "-o", f"{g}/gpt")
    step(f"{b}/nnsc-plan", f"{g}/gpt/graph.pb", "--policy", "dp", "--runtime-ngpus", "2",
         "-o", f"{g}/gpt/plan.pb")
    step(f"{b}/nnsc-codegen", f"{g}/gpt/graph.pb", f"{g}/gpt/plan.pb", "-o", f"{g}/prog")
    step(f"{b}/nnsc-prepare-data", args.data, "-o", f"{g}/tokens")
    cfg = (f"# a good trainer config: the tiny GPT on 2 data-parallel ranks; run_dir is\n"
           f"# relative, so each case (its own working directory) trains into its own\n"
           f"program: {g}/prog\nrun_dir: run\nseed: 1\nthreads: 1\n"
           f"data:\n  train: {g}/tokens/train.bin\n  val: {g}/tokens/val.bin\n  block_size: 32\n"
           f"train:\n  steps: 2\n  micro_batch_size: 2\n  log_every: 1\n"
           f"optimizer:\n  name: adamw\n  lr: 0.001\n"
           f"checkpoint:\n  every: 2\n  keep_last: 1\n")
    write(f"{g}/cfg.yaml", cfg.encode())
    step(f"{b}/nnsc-run", f"{g}/cfg.yaml", "--nproc-per-node", "2", f"--run_dir={g}/run")
    step(f"{b}/nnsc-merge-ckpt", f"{g}/run", "-o", f"{g}/merged.pt")
    log.close()
    configs = os.path.join(ROOT, "configs")
    return {
        "work": args.work, "bin": args.bin, "examples": args.examples, "data": args.data,
        "root": ROOT, "python": args.python, "good": g,
        "mlp": f"{g}/mlp", "gpt": f"{g}/gpt", "prog": f"{g}/prog", "tokens": f"{g}/tokens",
        "cfg": f"{g}/cfg.yaml", "run": f"{g}/run", "ckpt": f"{g}/run/checkpoints/step-2",
        "merged": f"{g}/merged.pt", "merged_optim": f"{g}/merged.optim.pt",
        "cluster": f"{configs}/clusters/cpu-local.example.yaml",
        "device": f"{configs}/devices/cpu-local.example.yaml",
        "comm": f"{configs}/comm/cpu-local.example.yaml",
        "h100": f"{configs}/devices/h100-sxm.yaml",
    }


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="directory of the nnsc-* tools")
    ap.add_argument("--work", required=True, help="scratch directory (wiped per case)")
    ap.add_argument("--examples", default=os.path.join(ROOT, "examples"))
    shared = os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt")
    excerpt = os.path.join(ROOT, "test", "golden", "Inputs", "trainer", "shakespeare-20k.txt")
    ap.add_argument("--data", default=shared if os.path.exists(shared) else excerpt,
                    help="a text to tokenize for the good run (default: ../shared/data/"
                         "tinyshakespeare.txt, else the golden tests' 20 KB excerpt)")
    ap.add_argument("--python", default=sys.executable, help="Python with torch, for the exporters")
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"))
    ap.add_argument("--filter", default="", help="run only cases whose name or group contains it")
    ap.add_argument("-j", type=int, default=1, help="cases run at once")
    ap.add_argument("-v", action="store_true", help="print every case's output")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--sanitized", action="store_true",
                    help="the tools are built with AddressSanitizer: skip the cases that cap the "
                         "address space (rlimit-as), which its shadow memory cannot run under")
    ap.add_argument("--prepare-only", action="store_true",
                    help="build WORK/good and exit (to reproduce a case by hand)")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.work = os.path.abspath(args.work)
    args.examples = os.path.abspath(args.examples)
    args.data = os.path.abspath(args.data)

    cases = []
    for f in sorted(os.listdir(args.cases)):
        if f.endswith(".txt"):
            cases += parse_cases(os.path.join(args.cases, f))
    seen = {}
    for c in cases:
        if c.name in seen:
            raise SystemExit(f"{c.source}: error: case name '{c.name}' also at {seen[c.name]}")
        seen[c.name] = c.source
    cases = [c for c in cases if args.filter in c.name or args.filter in c.group]
    skipped = [c for c in cases if args.sanitized and c.rlimit_as]
    cases = [c for c in cases if c not in skipped]
    if args.list:
        for c in cases:
            print(f"{c.group:22} {c.name}{'  (xfail)' if c.xfail else ''}")
        return 0
    if not cases and not args.prepare_only:
        raise SystemExit(f"hostile: no case matches --filter '{args.filter}'")

    t0 = time.monotonic()
    os.makedirs(args.work, exist_ok=True)
    if not args.filter and os.path.isdir(os.path.join(args.work, "cases")):
        shutil.rmtree(os.path.join(args.work, "cases"))  # cases of an older corpus too
    names = prepare(args)
    t_prep = time.monotonic() - t0
    if args.prepare_only:
        print(f"hostile: good artifacts in {names['good']} ({t_prep:.1f} s)")
        return 0
    print(f"hostile: good artifacts in {t_prep:.1f} s; {len(cases)} cases, -j {args.j}"
          + (f" ({len(skipped)} with an address-space limit skipped under ASan)" if skipped else ""),
          flush=True)

    counts = {"PASS": 0, "FAIL": 0, "XFAIL": 0, "XPASS": 0}
    groups = {}
    bad = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
        futures = [pool.submit(run_case, args, c, names) for c in cases]
        for fut in concurrent.futures.as_completed(futures):
            case, status, problems, out, secs, rc = fut.result()
            counts[status] += 1
            g = groups.setdefault(case.group, {"cases": 0, "XFAIL": 0})
            g["cases"] += 1
            g["XFAIL"] += status == "XFAIL"
            print(f"{status:5} {case.group}/{case.name} ({secs:.1f} s)", flush=True)
            if status in ("FAIL", "XPASS") or args.v:
                if status == "XPASS":
                    print(f"      the bug it pins looks fixed ({case.xfail}); remove its xfail: mark "
                          f"and its entry in FINDINGS.md")
                for p in problems:
                    print(f"      {p}")
                print(f"      case: {case.source}")
                print(f"      cmd: {subst(case.cmd, dict(names, case=os.path.join(args.work, 'cases', case.name)))}")
                tail = out[-3000:]
                print("      output" + (" (last 3000 characters)" if len(out) > 3000 else "") + ":")
                for line in tail.splitlines():
                    print("      | " + line)
            if status in ("FAIL", "XPASS"):
                bad.append(f"{case.group}/{case.name}")
    total = time.monotonic() - t0
    for name in sorted(groups):
        print(f"  {name:22} {groups[name]['cases']:4} cases, {groups[name]['XFAIL']:3} known bugs")
    print(f"hostile: {counts['PASS']} passed, {counts['XFAIL']} expected failures (known bugs), "
          f"{counts['FAIL']} failed, {counts['XPASS']} unexpectedly passed; {total:.1f} s")
    for b in bad:
        print(f"  {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
