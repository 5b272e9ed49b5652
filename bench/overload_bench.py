"""A publisher that never waits against one consumer (issue 19): producer rate, consumer
rate and broker peak RSS, Roost next to RabbitMQ (its STOMP, Web-STOMP and MQTT plugins).

    .venv/bin/python bench/overload_bench.py [--scenarios stomp-tcp,stomp-ws,amqp,mqtt]
        [--brokers roost,rabbitmq] [--repeat 3] [--duration 10] [--batch 32]
    .venv/bin/python bench/overload_bench.py --scenarios stomp-tcp --ack auto --producers 2
    .venv/bin/python bench/overload_bench.py --scenarios stomp-tcp --receipt-every 100
    .venv/bin/python bench/overload_bench.py --scenarios stomp-tcp --topic
    .venv/bin/python bench/overload_bench.py --scenarios stomp-tcp,amqp --consumers 10

Scenarios (1 KiB bodies unless ``--size``):

* ``stomp-tcp``, ``stomp-ws``: ``--producers`` processes each write ``--batch`` SENDs to
  one ``/queue/`` per write, no receipts, as fast as TCP takes them; one consumer
  subscribes with ``ack:client-individual`` (``--ack``) and ``prefetch-count:100``
  (``--prefetch``) and acks each message (the acks of one read in one write). Over
  WebSocket a write is one WebSocket message. ``--topic``: the producers send to a
  ``/topic/`` and the consumer subscribes to it (its own queue).
* ``amqp``: the same with AMQP 0-9-1: ``basic.publish`` batches, no confirms; one
  auto-ack consumer.
* ``mqtt`` (issue 24): MQTT 3.1.1 over TCP: ``--producers`` processes each write
  ``--batch`` QoS 0 PUBLISHes of one topic per write; one consumer with a clean-session
  QoS 1 subscription to it reads as fast as it can and PUBACKs any QoS 1 delivery (a
  QoS 0 publish is delivered at QoS 0). Both brokers get ``--prefetch`` as their MQTT
  in-flight bound (Roost ``--mqtt-prefetch``, RabbitMQ ``mqtt.prefetch``; 10 by default
  there). ``--topic`` does not apply.

Each scenario starts both brokers afresh, then runs ``--repeat`` times per broker,
alternating which goes first. A run subscribes the consumer, starts the producers,
waits ``--warmup`` seconds, then counts messages produced (written into the socket)
and consumed over ``--duration`` seconds, sampling the broker's RSS (VmRSS of the
process listening on its port; ``beam.smp`` for RabbitMQ) every 0.1 s; afterwards the
queue is deleted. The table shows medians; ``peak RSS`` is the median of the runs'
peaks. A producer held by flow control shows as a producer rate close to the consumer
rate; one that is not shows as a producer far ahead and a growing RSS.

``--consumers N``: N consumer processes on the one queue (MQTT: N subscriptions of the
topic); the consumed rate is their sum, and "slowest consumer's share" is the fewest
messages one of them took over an even split (1.00: even; near 0: a starved consumer),
the lowest over the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # sibling modules, not a package
import _overload_clients as clients
from _measure import broker_pid, rss_mb

SPAWN = multiprocessing.get_context("spawn")
SCENARIOS = ("stomp-tcp", "stomp-ws", "amqp", "mqtt")


class Broker:
    """A running broker: its AMQP URL and STOMP (``tcp``, ``ws``) or ``mqtt`` ports."""

    def __init__(self, url: str, ports: dict[str, int]) -> None:
        self.url, self.ports = url, ports
        self.pid = broker_pid(url)


def _launch(name: str, stack: contextlib.ExitStack, scenario: str,
            args: argparse.Namespace) -> Broker:
    if scenario == "mqtt":
        mqtt = _brokers.free_port()
        if name == "roost":
            url = stack.enter_context(_brokers.roost(
                "--mqtt-port", str(mqtt), "--mqtt-prefetch", str(args.prefetch)))
        else:
            url = stack.enter_context(_brokers.rabbitmq(
                plugins=("rabbitmq_mqtt",),
                extra_conf=(f"mqtt.listeners.tcp.default = 127.0.0.1:{mqtt}\n"
                            f"mqtt.prefetch = {args.prefetch}\n"),
            ))
        _wait_listening(mqtt)
        return Broker(url, {"mqtt": mqtt})
    stomp, ws = _brokers.free_port(), _brokers.free_port()
    if name == "roost":
        url = stack.enter_context(_brokers.roost(
            "--stomp-port", str(stomp), "--ws-port", str(ws)))
    else:
        url = stack.enter_context(_brokers.rabbitmq(
            plugins=("rabbitmq_stomp", "rabbitmq_web_stomp"),
            extra_conf=(
                f"stomp.listeners.tcp.1 = 127.0.0.1:{stomp}\n"
                f"web_stomp.tcp.port = {ws}\nweb_stomp.tcp.ip = 127.0.0.1\n"
            ),
        ))
    broker = Broker(url, {"tcp": stomp, "ws": ws})
    _wait_listening(ws)
    return broker


def _wait_listening(port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


def run_once(broker: Broker, scenario: str, args: argparse.Namespace) -> dict[str, float]:
    """One measured run: produced/s, consumed/s, peak RSS MB."""
    queue = f"overload-{time.monotonic_ns()}"
    produced = SPAWN.Value("q", 0, lock=False)
    counts = [SPAWN.Value("q", 0, lock=False) for _ in range(args.consumers)]
    readies, stop = [SPAWN.Event() for _ in counts], SPAWN.Event()
    consumers: list[Any] = []
    if scenario == "amqp":
        consumers = [SPAWN.Process(target=clients.amqp_consumer,
                                   args=(broker.url, queue, consumed, ready, stop))
                     for consumed, ready in zip(counts, readies, strict=True)]
        producer_args: tuple[Any, ...] = (broker.url, queue, args.size, args.batch, produced,
                                          stop)
        produce: Callable[..., None] = clients.amqp_producer
    elif scenario == "mqtt":
        port, topic = broker.ports["mqtt"], f"overload/{queue}"
        consumers = [SPAWN.Process(target=clients.mqtt_consumer,
                                   args=(port, topic, f"{queue}-sub{i or ''}", consumed, ready,
                                         stop))
                     for i, (consumed, ready) in enumerate(zip(counts, readies, strict=True))]
        producer_args = (port, topic, f"{queue}-pub", args.size, args.batch, produced, stop)
        produce = clients.mqtt_producer
    else:
        transport = scenario.removeprefix("stomp-")
        port = broker.ports[transport]
        dest = f"/topic/{queue}" if args.topic else f"/queue/{queue}"
        consumers = [SPAWN.Process(target=clients.stomp_consumer, args=(
            transport, port, dest, args.ack, args.prefetch, consumed, ready, stop))
            for consumed, ready in zip(counts, readies, strict=True)]
        producer_args = (transport, port, dest, args.size, args.batch, args.receipt_every,
                         produced, stop)
        produce = clients.stomp_producer
    for consumer in consumers:
        consumer.start()
    for ready in readies:
        if not ready.wait(60):
            for c in consumers:
                c.kill()
            raise RuntimeError("a consumer did not subscribe")
    producers = [SPAWN.Process(target=produce, args=producer_args)
                 for _ in range(args.producers)]
    for p in producers:
        p.start()
    peak = 0.0
    try:
        time.sleep(args.warmup)
        p0, t0 = produced.value, time.monotonic()
        c0 = [c.value for c in counts]
        end = t0 + args.duration
        while (now := time.monotonic()) < end:
            peak = max(peak, rss_mb(broker.pid))
            time.sleep(min(0.1, end - now))
        p1, t1 = produced.value, time.monotonic()
        c1 = [c.value for c in counts]
        peak = max(peak, rss_mb(broker.pid))
    finally:
        stop.set()
        for p in [*producers, *consumers]:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    if scenario == "mqtt":  # the clean session's queue goes with it; make sure of it
        clients.delete_queue(broker.url, f"mqtt-subscription-{queue}-subqos1")
    elif not args.topic:
        clients.delete_queue(broker.url, queue)
    got = [b - a for a, b in zip(c0, c1, strict=True)]
    # fairness: the slowest consumer's share of an even split (1.0 = perfectly even, 0 = one
    # consumer starved); a broker that round-robins keeps it near 1.
    fair = min(got) * len(got) / sum(got) if sum(got) else 0.0
    return {"produced": (p1 - p0) / (t1 - t0), "consumed": sum(got) / (t1 - t0),
            "rss": peak, "fair": fair, "rss_end": rss_mb(broker.pid)}


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", default="roost,rabbitmq")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=32, help="frames per write")
    ap.add_argument("--producers", type=int, default=1)
    ap.add_argument("--consumers", type=int, default=1,
                    help="consumers of the one queue (MQTT: subscriptions of the topic)")
    ap.add_argument("--ack", default="client-individual",
                    choices=("client-individual", "client", "auto"))
    ap.add_argument("--prefetch", type=int, default=100)
    ap.add_argument("--receipt-every", type=int, default=0,
                    help="a RECEIPT every N SENDs, awaited before the next N (0: none)")
    ap.add_argument("--topic", action="store_true", help="a /topic/ instead of a /queue/")
    args = ap.parse_args()
    names = [b for b in args.brokers.split(",") if b]
    if "rabbitmq" in names and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipped", file=sys.stderr)
        names.remove("rabbitmq")
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for scenario in args.scenarios.split(","):
        if scenario not in SCENARIOS:
            raise SystemExit(f"unknown scenario {scenario}")
        with contextlib.ExitStack() as stack:
            brokers = {name: _launch(name, stack, scenario, args) for name in names}
            for rep in range(args.repeat):
                for name in names if rep % 2 == 0 else names[::-1]:
                    got = run_once(brokers[name], scenario, args)
                    print(f"{scenario} {name}: {got['produced']:,.0f} produced/s, "
                          f"{got['consumed']:,.0f} consumed/s, peak RSS {got['rss']:,.0f} MB, "
                          f"slowest consumer {got['fair']:.2f} of an even share",
                          file=sys.stderr, flush=True)
                    results.setdefault(scenario, {}).setdefault(name, []).append(got)
    shape = (f"{args.producers} producer(s), {args.consumers} consumer(s), "
             f"{args.batch} frames a write, {args.size} B, "
             f"consumer ack {args.ack} prefetch {args.prefetch} (AMQP: auto-ack; "
             "MQTT: QoS 0 publishes, a QoS 1 subscription, in-flight bound = prefetch)"
             + (f", receipt every {args.receipt_every}" if args.receipt_every else "")
             + (", topic" if args.topic else "")
             + f"; {args.repeat} runs of {args.duration:g} s, medians")
    print(shape)
    heads = [f"{_brokers.TITLES[n]} consumed/s (produced/s) | {_brokers.TITLES[n]} peak RSS MB"
             f" | {_brokers.TITLES[n]} slowest consumer's share" for n in names]
    print("| scenario | " + " | ".join(heads)
          + (" | consumed ratio |" if len(names) == 2 else " |"))
    print("|---|" + "---|---|---|" * len(names) + ("---|" if len(names) == 2 else ""))
    for scenario, per in results.items():
        cells = []
        for name in names:
            runs = per[name]
            cells += [f"{_median(runs, 'consumed'):,.0f} ({_median(runs, 'produced'):,.0f})",
                      f"{_median(runs, 'rss'):,.0f}", f"{min(r['fair'] for r in runs):.2f}"]
        ratio = []
        if len(names) == 2 and (theirs := _median(per[names[1]], "consumed")) > 0:
            ratio = [f"{_median(per[names[0]], 'consumed') / theirs:.2f}"]
        print("| " + " | ".join([scenario, *cells, *ratio]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
