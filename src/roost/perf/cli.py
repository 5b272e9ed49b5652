"""Arguments of ``roost perf`` and its entry point: one JSON line on stdout per run."""

from __future__ import annotations

import argparse
import json
import signal
import sys

from roost.perf.options import DEFAULT_URL, Options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    # argparse %-formats help strings: the %2F of the default vhost must be doubled.
    add("--url", default=DEFAULT_URL,
        help=f"broker URL (default {DEFAULT_URL.replace('%', '%%')})")
    add("--producers", type=int, default=1, metavar="N", help="producer processes (1)")
    add("--consumers", type=int, default=1, metavar="N", help="consumer processes (1)")
    add("--size", type=int, default=16, metavar="BYTES",
        help="message body size (16); the first 8 bytes carry the send timestamp")
    add("--duration", type=float, default=10.0, metavar="SECONDS",
        help="measured publishing window (10)")
    add("--persistent", action="store_true", help="publish with delivery-mode 2")
    add("--confirm", type=int, default=0, metavar="N",
        help="publisher confirms: at most N unconfirmed per producer (0 = no confirms)")
    add("--prefetch", type=int, default=0, metavar="N",
        help="consumer basic.qos prefetch count (0 = unlimited)")
    add("--auto-ack", action="store_true", help="consume with no-ack (default: manual acks)")
    add("--multi-ack-every", type=int, default=1, metavar="N",
        help="manual acks: one ack with multiple=true every N messages (1 = ack each)")
    add("--rate", type=float, default=0.0, metavar="MSGS_PER_S",
        help="publish rate limit per producer (0 = unlimited)")
    add("--queue", default="roost-perf", metavar="NAME",
        help="queue to use; it is purged first and deleted at the end (roost-perf)")
    add("--durable-queue", action="store_true", help="declare the queue(s) durable")
    add("--exchange", default="", metavar="NAME",
        help='exchange to publish to ("" = default exchange); a named one is a direct '
        "exchange bound to the queue with the queue name as routing key")
    add("--queue-arg", action="append", default=[], metavar="KEY=VALUE",
        help="a queue.declare argument, repeatable (x-max-length=1000; integers stay integers)")
    add("--priorities", type=int, default=0, metavar="N",
        help="publish with priorities cycling 0..N-1 (0 = no priority property)")
    add("--queue-declares", type=int, default=0, metavar="N",
        help="instead of messaging: declare N queues one round trip at a time, "
        "report declares/s, then delete them")
    add("--json", action="store_true", default=True,
        help="print the result as one JSON line (the default and only format)")


def run(args: argparse.Namespace) -> int:
    from roost.perf import client, runner

    try:
        opts = Options.from_args(args)
    except ValueError as exc:
        print(f"roost perf: {exc}", file=sys.stderr)
        return 2
    # SIGTERM ends a run like Ctrl-C: workers are stopped and the queue is deleted.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = runner.run(opts)
    except KeyboardInterrupt:
        print("roost perf: interrupted", file=sys.stderr)
        return 130
    except (OSError, TimeoutError, runner.PerfError, client.ClosedByBroker) as exc:
        print(f"roost perf: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(json.dumps(report, separators=(",", ":")), flush=True)
    return 1 if report.get("errors") else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
