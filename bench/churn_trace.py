"""Where Roost's memory goes under connection churn: ``rss_bench.py --churn``'s load on a
pure-Python Roost traced by ``tracemalloc``, snapshots after the first round and the last
compared (issue 19's follow-up).

    PYTHONPATH=src .venv/bin/python bench/churn_trace.py [--churn 20000,5000,5000]
        [--frames 6] [--top 25] [--every 5]

The server runs under a small wrapper (this file with ``--server``) that starts
``tracemalloc`` before Roost is imported and, on SIGUSR1, collects garbage and writes a
snapshot plus live-object counts by type; nothing of this is in the product. For each
round: RSS, traced bytes, live objects; then the allocation sites and object types that
grew between round 1 and the end. Traced memory flat while RSS creeps is the allocator
keeping its arenas, not a leak.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # sibling modules, not a package
import _churn_rss
from _measure import broker_pid, rss_mb


def _server(out: str, frames: int, argv: list[str]) -> None:
    """The traced server: SIGUSR1 writes ``out``/N.snap and ``out``/N.json."""
    if frames:
        tracemalloc.start(frames)
    seq = [0]

    def dump(_sig: int, _frame: Any) -> None:
        seq[0] += 1
        base = Path(out) / str(seq[0])
        info: dict[str, Any] = {"gc_count": gc.get_count(), "rss_before": _rss_self()}
        # the cyclic garbage the server's collector has not reached yet, by type
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        garbage = collections.Counter(type(o).__qualname__ for o in gc.garbage)
        if os.environ.get("CHURN_CYCLES"):
            info["cycles"] = _cycles(gc.garbage)
        gc.garbage.clear()
        gc.set_debug(0)
        gc.collect()  # the same cycles, unreachable again: freed this time
        info |= {"garbage": found, "garbage_types": dict(garbage.most_common(40)),
                 "rss_after": _rss_self()}
        types = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        info |= {"objects": sum(types.values()), "types": dict(types), "traced": 0}
        if frames:
            tracemalloc.take_snapshot().dump(f"{base}.snap")
            info["traced"] = tracemalloc.get_traced_memory()[0]
        Path(f"{base}.json.tmp").write_text(json.dumps(info))
        os.replace(f"{base}.json.tmp", f"{base}.json")  # the reader waits for this name

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["roost", *argv]
    from roost.cli import main

    raise SystemExit(main())


def _label(src: Any, dst: Any) -> str:
    """How ``src`` refers to ``dst``: an attribute's or a key's name when there is one."""
    attrs = getattr(src, "__dict__", None)
    if isinstance(attrs, dict):
        for k, v in attrs.items():
            if v is dst:
                return f".{k}"
    for slot in getattr(type(src), "__slots__", ()):
        if getattr(src, slot, None) is dst:
            return f".{slot}"
    if isinstance(src, dict):
        for k, v in src.items():
            if v is dst:
                return f"[{k!r}]"[:40]
    for name in ("__self__", "__func__", "cr_frame", "f_locals", "__traceback__", "tb_frame"):
        if getattr(src, name, None) is dst:
            return f".{name}"
    return ""


def _cycles(objs: list[Any]) -> list[dict[str, Any]]:
    """The strongly connected parts of a heap of garbage (what holds it in cycles), the
    three biggest distinct shapes: their types and the edges inside them."""
    ids = {id(o): o for o in objs}
    edges = {i: [id(r) for r in gc.get_referents(o) if id(r) in ids] for i, o in ids.items()}
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on: set[int] = set()
    stack: list[int] = []
    sccs: list[list[int]] = []
    for root in ids:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on.add(v)
            recurse = False
            for j in range(i, len(edges[v])):
                w = edges[v][j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(comp)
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    shapes: dict[str, dict[str, Any]] = {}
    for comp in sccs:
        members = set(comp)
        kinds = collections.Counter(type(ids[i]).__qualname__ for i in comp)
        key = repr(sorted(kinds.items()))
        if key in shapes:
            shapes[key]["count"] += 1
            continue
        links = sorted({f"{type(ids[a]).__qualname__}{_label(ids[a], ids[b])} -> "
                        f"{type(ids[b]).__qualname__}" for a in comp for b in edges[a]
                        if b in members})
        shapes[key] = {"count": 1, "size": len(comp), "types": dict(kinds), "links": links}
    return sorted(shapes.values(), key=lambda s: -s["count"] * s["size"])[:3]


def _rss_self() -> float:
    return rss_mb(os.getpid())


def _snapshot(pid: int, out: Path, n: int) -> dict[str, Any]:
    os.kill(pid, signal.SIGUSR1)
    path = out / f"{n}.json"
    deadline = time.monotonic() + 300
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("no snapshot from the server")
        time.sleep(0.2)
    info: dict[str, Any] = json.loads(path.read_text())
    return info


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--server":
        _server(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--churn", default="20000,5000,5000", metavar="AMQP,STOMP,WS")
    ap.add_argument("--frames", type=int, default=6, help="0: no tracemalloc")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--every", type=int, default=5, help="a snapshot every N rounds")
    args = ap.parse_args()
    counts = tuple(int(n) for n in args.churn.split(","))
    out = Path(tempfile.mkdtemp(prefix="churn-trace-"))
    stomp, ws, http = _brokers.free_port(), _brokers.free_port(), _brokers.free_port()
    # the wrapper instead of the ``roost`` script: ``_brokers.roost`` runs _roost_command()
    wrapper = [sys.executable, __file__, "--server", str(out), str(args.frames)]
    _brokers._roost_command = lambda: wrapper  # type: ignore[attr-defined]
    launcher = _brokers.roost("--stomp-port", str(stomp), "--ws-port", str(ws),
                              "--http-port", str(http))
    rows: list[tuple[int, float, dict[str, Any]]] = []
    with launcher as url:
        pid = broker_pid(url)
        _churn_rss._wait_port(ws)
        time.sleep(1)
        rows.append((0, rss_mb(pid), _snapshot(pid, out, 1)))
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "rss_bench.py"), "--churn-client",
             url, str(stomp), str(ws), *map(str, counts)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        total = max(1, -(-sum(counts) // _churn_rss.ROUND))
        for rounds, line in enumerate(proc.stdout, 1):
            _, _, opened = line.split()
            _churn_rss._settle(http)
            if rounds == 1 or rounds % args.every == 0 or rounds == total:
                info = _snapshot(pid, out, len(rows) + 1)
                rows.append((int(opened), rss_mb(pid), info))
                print(f"{opened} connections: RSS {info['rss_before']:.1f} MB, after a full "
                      f"collection {info['rss_after']:.1f} MB ({info['garbage']:,} objects "
                      f"in cycles), traced {info['traced'] / 2**20:.2f} MB",
                      file=sys.stderr, flush=True)
            proc.stdin.write("\n")
            proc.stdin.flush()
        proc.wait()
        print("left in the API:", _churn_rss._leftovers(http) or "none")
    print("| connections | RSS MB | cyclic garbage | RSS after gc.collect() | traced MB "
          "| live objects |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, _rss, info in rows:
        print(f"| {n:,} | {info['rss_before']:.1f} | {info['garbage']:,} | "
              f"{info['rss_after']:.1f} | {info['traced'] / 2**20:.2f} | {info['objects']:,} |")
    print("\ncyclic garbage by type at the end:", rows[-1][2]["garbage_types"])
    for shape in rows[-1][2].get("cycles", []):
        print(f"\ncycle x{shape['count']}, {shape['size']} objects: {shape['types']}")
        for link in shape["links"]:
            print("   ", link)
    if not args.frames:
        return 0
    first, last = 2, len(rows)
    old = tracemalloc.Snapshot.load(str(out / f"{first}.snap"))
    new = tracemalloc.Snapshot.load(str(out / f"{last}.snap"))
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__),
              tracemalloc.Filter(False, pickle.__file__)]
    old, new = old.filter_traces(ignore), new.filter_traces(ignore)
    print(f"\ngrowth by line, after round 1 -> the end (top {args.top}):")
    for stat in new.compare_to(old, "lineno")[: args.top]:
        print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d}  {stat.traceback}")
    print("\ngrowth by traceback (top 8):")
    for stat in new.compare_to(old, "traceback")[:8]:
        print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d}")
        for line in stat.traceback.format()[-2 * args.frames :]:
            print("     ", line)
    print("\nlive objects by type, after round 1 -> the end (top 20):")
    a, b = rows[1][2]["types"], rows[-1][2]["types"]
    diff = sorted(((b.get(t, 0) - a.get(t, 0), t) for t in set(a) | set(b)), reverse=True)
    for d, t in diff[:20]:
        print(f"  {d:+8d} {t} ({b.get(t, 0):,})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
