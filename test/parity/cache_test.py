"""Checks parity.py's result sharing (`cached`): the first call with a key produces and
stores, a second with the same key copies without producing, a changed key produces
again, a failed production stores nothing, and no cache (NNSC_PARITY_CACHE=off) always
produces. Exits 1 naming the first check that fails."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402

failed = []


def check(what, cond):
    print(f"{'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        failed.append(what)


with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "cache")
    calls = []

    def producer(out, text):
        def produce():
            calls.append(text)
            os.makedirs(out, exist_ok=True)
            with open(os.path.join(out, "result"), "w") as f:
                f.write(text)
        return produce

    read = lambda out: open(os.path.join(out, "result")).read()
    a, b, c, d = (os.path.join(tmp, n) for n in "abcd")
    parity.cached(cache, "t", {"x": 1}, a, producer(a, "one"))
    check("first call produces", calls == ["one"] and read(a) == "one")
    parity.cached(cache, "t", {"x": 1}, b, producer(b, "two"))
    check("same key: copied, not produced", calls == ["one"] and read(b) == "one")
    parity.cached(cache, "t", {"x": 2}, c, producer(c, "three"))
    check("changed key: produced", calls == ["one", "three"] and read(c) == "three")
    parity.cached(cache, "u", {"x": 1}, d, producer(d, "four"))
    check("other kind, same key: produced", calls[-1] == "four" and read(d) == "four")

    def broken():
        raise RuntimeError("production failed")
    try:
        parity.cached(cache, "t", {"x": 3}, os.path.join(tmp, "e"), broken)
    except RuntimeError:
        pass
    parity.cached(cache, "t", {"x": 3}, os.path.join(tmp, "f"), producer(os.path.join(tmp, "f"), "five"))
    check("a failed production stores nothing", calls[-1] == "five")
    n = len(calls)
    parity.cached(None, "t", {"x": 1}, a, producer(a, "six"))
    check("no cache: always produced", len(calls) == n + 1 and read(a) == "six")

    src = os.path.join(tmp, "in.bin")
    with open(src, "wb") as f:
        f.write(b"abc")
    first = parity.digest(src)
    parity._digests.clear()
    with open(src, "wb") as f:
        f.write(b"abd")
    check("a changed file changes its digest", parity.digest(src) != first)

sys.exit(1 if failed else 0)
