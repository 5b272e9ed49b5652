"""What the events stream costs: the broker's CPU time per message with ``--events-stream``
off and on, measured with ``roost perf``.

    .venv/bin/python bench/events_overhead.py [--repeat 3] [--duration 5] [--rate 5000]
        [--scenarios pub,pubsub]
    .venv/bin/python bench/events_overhead.py --in-process [--messages 100000]

Starts two Roost servers, one with ``--events-stream roost.events``, and runs each
scenario ``--repeat`` times against each, alternating which goes first. Around every run
it reads the server's CPU time (user + system, ``/proc/PID/stat``) and reports the delta
divided by the messages published: CPU time, not wall clock, so what else runs on the box
matters much less. ``--rate`` limits the producer (0 = as fast as it goes) so both servers
handle the same traffic. Scenarios: ``pub`` publishes with no consumer (one event per
message), ``pubsub`` has one consumer with manual acks (three events per message:
published, delivered, acked). Medians go to stdout as a Markdown table.

``--in-process`` measures the core alone, without sockets or other processes: CPU time
per ``vhost.publish`` into a queue (one event a message, flushed every 500 events as the
broker does), events off and on, in this process; the steadiest figure on a busy box.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling modules, not a package
from _measure import broker_pid, cpu_seconds
from amqp_throughput import Scenario, perf

SCENARIOS = {
    "pub": Scenario("pub", "1 producer, no consumer, 16 B (1 event a message)",
                    ("--producers", "1", "--consumers", "0", "--size", "16")),
    "pubsub": Scenario("pubsub", "1 producer / 1 consumer, 16 B, prefetch 100, manual ack "
                       "(3 events a message)",
                       ("--producers", "1", "--consumers", "1", "--size", "16",
                        "--prefetch", "100")),
}
MODES = {"off": (), "on": ("--events-stream", "roost.events")}


def in_process(messages: int) -> None:
    import time

    from roost.core import events_stream
    from roost.core.broker import Broker
    from roost.core.message import Message, Properties
    from roost.store.memory import MemoryStore
    from roost.store.stream_store import StreamFiles

    def run(data: Path, events_on: bool) -> float:
        broker = Broker.with_defaults(store=MemoryStore(), stream_storage=StreamFiles(data))
        streams = events_stream.enable(broker.catalog, "ev", 1 << 30) if events_on else None
        events = streams.by_vhost["/"] if streams is not None else None
        vhost = broker.vhosts["/"]
        vhost.declare_queue("q")
        message = Message("", "q", Properties(message_id="m"), b"x" * 16)
        started = time.process_time()
        for _ in range(messages):
            vhost.publish("", message)
            if events is not None and len(events.buffer) >= events_stream.BATCH_EVENTS:
                events.flush()  # what the broker's loop does once a batch is full
        if events is not None:
            events.flush()
        return (time.process_time() - started) / messages * 1e6

    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        off = statistics.median(run(Path(tmp) / f"off{i}", False) for i in range(3))
        on = statistics.median(run(Path(tmp) / f"on{i}", True) for i in range(3))
    print("| in process, vhost.publish into a queue | CPU µs, events off | events on |")
    print("|---|---|---|")
    print(f"| {messages:,} publishes, median of 3 | {off:.2f} | {on:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args(argv)
    if args.in_process:
        in_process(args.messages)
        return 0
    scenarios = [SCENARIOS[k.strip()] for k in args.scenarios.split(",") if k.strip()]
    per_message: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack, open(os.devnull, "w") as log:
        urls = {mode: stack.enter_context(_brokers.roost(*extra)) for mode, extra in MODES.items()}
        servers = {mode: (url, broker_pid(url)) for mode, url in urls.items()}
        for s in scenarios:
            limited = Scenario(s.key, s.title, (*s.args, "--rate", str(args.rate)))
            for rep in range(args.repeat):
                for mode in (("off", "on") if rep % 2 == 0 else ("on", "off")):
                    url, pid = servers[mode]
                    before = cpu_seconds(pid)
                    report = perf(url, limited, args.duration, f"bench-{s.key}-{rep}", log)
                    used = cpu_seconds(pid) - before
                    sent = report["published"]
                    us = used / sent * 1e6 if sent else float("nan")
                    per_message.setdefault((s.key, mode), []).append(us)
                    print(f"{s.key} run {rep + 1} events {mode}: {sent:,} messages, "
                          f"{used:.2f} s CPU, {us:.1f} µs a message", file=sys.stderr,
                          flush=True)
    print("| scenario | CPU µs a message, events off | events on | overhead |")
    print("|---|---|---|---|")
    for s in scenarios:
        off = statistics.median(per_message[(s.key, "off")])
        on = statistics.median(per_message[(s.key, "on")])
        print(f"| {s.title} | {off:.1f} | {on:.1f} | {100 * (on - off) / off:+.0f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
