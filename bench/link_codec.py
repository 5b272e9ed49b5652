"""CPU of the node-to-node link codec per message, in process: what one hop adds to the
broker's own work for a 1 KiB message (forward the publish, its confirm, relay the
delivery, its ack, a credit every 50), frames encoded in batches of 100 and decoded from
one buffer, as the transport writes and reads them; the hand-written fast paths
(roost/cluster/link/fast.py) against the generic field loop, alternating, medians.

    .venv/bin/python bench/link_codec.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from roost.cluster.link import fast
from roost.cluster.link import frames as f
from roost.cluster.link.codec import Encoder, LinkReader, NeedData

BODY = b"x" * 1024
PROPS = b"\x80\x00\x02"  # a content header's property bytes (delivery-mode 2)


def frames_of_one_hop(i: int) -> list[f.Frame]:
    out: list[f.Frame] = [
        f.Publish(i, f.PUBLISH_CONFIRM, "/", ["q"], "", "q", PROPS, BODY),
        f.PublishResult(i, f.Outcome.CONFIRMED),
        f.Deliver(1, i, 0, 0, "", "q", PROPS, BODY),
        f.Settle(1, f.SettleOp.ACK, 0, i),
    ]
    if i % 50 == 0:
        out.append(f.Credit(1, 50))
    return out


def one_run(messages: int) -> tuple[float, float]:
    """(µs to encode, µs to decode) per message."""
    batches = []
    encoder = Encoder()
    started = time.perf_counter()
    for i in range(messages):
        for frame in frames_of_one_hop(i):
            encoder.add(frame)
        if i % 100 == 99:
            batches.append(encoder.take())
    encoded = time.perf_counter() - started
    reader = LinkReader()
    started = time.perf_counter()
    count = 0
    for data in batches:
        reader.feed(data)
        while not isinstance(reader.next_frame(), NeedData):
            count += 1
    decoded = time.perf_counter() - started
    assert count >= 4 * (messages // 100) * 100
    return encoded / messages * 1e6, decoded / messages * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    encoders, decoders = dict(fast.ENCODERS), dict(fast.DECODERS)
    runs: dict[str, list[tuple[float, float]]] = {"hand-written": [], "generic": []}
    for _ in range(args.repeat):  # alternating, so both see the same machine
        for name in runs:
            fast.ENCODERS.clear()
            fast.DECODERS.clear()
            if name == "hand-written":
                fast.ENCODERS.update(encoders)
                fast.DECODERS.update(decoders)
            runs[name].append(one_run(args.messages))
    print("| one 1 KiB message through one hop (publish, confirm, deliver, ack), µs "
          "| encode | decode | both |")
    print("|---|---|---|---|")
    for name, results in runs.items():
        enc = statistics.median(r[0] for r in results)
        dec = statistics.median(r[1] for r in results)
        print(f"| {name} codec | {enc:.2f} | {dec:.2f} | {enc + dec:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
