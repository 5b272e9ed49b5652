"""A quorum queue member far behind catches up (issue 22): 3 Roost nodes and etcd;
``--held`` messages published with confirms and in sync on every member, kill -9 of a
follower, ``--behind`` messages published with confirms (1 KiB, persistent), the
follower restarted and timed until the leader counts it in sync (``online``); the
leader's and the follower's RSS sampled every 20 ms meanwhile. Then the leader is killed
(kill -9), the caught-up member and the other one elect a leader (a majority: one member
of three alone never leads) and every confirmed message must be served through the
caught-up member's node: the history checker decides (every confirmed delivered, nothing
acked again, order).

    .venv/bin/python bench/quorum_catchup.py --behind 100000 [--held 10] [--size 1024]
        [--repeat 3] [--lease-ttl 5]

``--held`` is what the returning member holds already (it was killed with them on its
disk): with ``--held 100000 --behind 10000`` the member lacks a tenth of the queue.

The suite's short version: ``tests/cluster/test_quorum_catchup.py`` (20,000 behind).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from roost.cluster.etcd_server import EtcdServer  # noqa: E402
from tests.cluster import catchup  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--behind", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=10, help="in the queue before the kill")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--within", type=float, default=300.0, help="seconds allowed")
    parser.add_argument("--lease-ttl", type=int, default=5, help="the nodes' etcd lease")
    args = parser.parse_args()
    runs: list[catchup.Figures] = []
    with tempfile.TemporaryDirectory(prefix="quorum-catchup-") as tmp:
        etcd = EtcdServer(Path(tmp) / "etcd").start()
        try:
            for k in range(args.repeat):
                fig = catchup.run(
                    etcd, f"/catchup{k}", Path(tmp) / f"run{k}", args.behind, args.size,
                    catch_up_within=args.within, lease_ttl=args.lease_ttl, held=args.held,
                )  # fmt: skip
                runs.append(fig)
                print(
                    f"run {k + 1}: publish {fig.publish_s:.1f} s,"
                    f" catch-up {fig.catch_up_s:.2f} s (start {fig.start_s:.2f} s), leader RSS"
                    f" {fig.leader_rss_before_mb:.0f} -> {fig.leader_rss_peak_mb:.0f} MB"
                    f" (its peak in the run {fig.leader_hwm_mb:.0f} MB),"
                    f" follower peak {fig.n3_rss_peak_mb:.0f} MB, delivered {fig.delivered}"
                    f" ({fig.live} confirmed during the catch-up),"
                    f" problems {fig.problems or 'none'}\n  leader: {fig.how.strip()}",
                    flush=True,
                )
        finally:
            etcd.stop()

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}"

    print(
        f"\n{args.held:,} held, {args.behind:,} messages of {args.size} B behind,"
        f" {len(runs)} run(s), medians:"
    )
    print("| catch-up s | leader RSS before MB | leader RSS peak MB | follower RSS peak MB |")
    print("|---|---|---|---|")
    print(
        f"| {med([r.catch_up_s for r in runs])}"
        f" | {med([r.leader_rss_before_mb for r in runs])}"
        f" | {med([r.leader_rss_peak_mb for r in runs])}"
        f" | {med([r.n3_rss_peak_mb for r in runs])} |"
    )
    bad = [r.problems for r in runs if r.problems or r.delivered < r.behind + r.held + r.live]
    print("history checker:", bad or "nothing confirmed lost in any run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
