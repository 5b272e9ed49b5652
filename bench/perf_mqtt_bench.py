"""``roost perf --protocol mqtt`` against Roost and RabbitMQ 3.10's rabbitmq_mqtt plugin
in the same run, with each of perf's MQTT clients (``--mqtt-client codec`` and
``paho``): rates, latency, and what the load generator itself spent (CPU seconds of
every perf process per message moved), which says whether the client or the broker set
the pace.

Shapes (each publisher sends ``--messages`` as fast as it can, ``-C``; a run ends when
the subscriber has drained, so no run leaves a backlog to the next one; rates are to
each side's last message; each shape on a topic of its own; medians of ``--runs``):

- ``qos0``: 1 MQTT publisher -> 1 MQTT subscriber, QoS 0 publishes, QoS 1 subscription;
- ``qos1``: the same with QoS 1 publishes and a confirm window of 100 (``-c 100``);
- ``amqp``: 1 MQTT publisher (QoS 0) -> 1 AMQP consumer (``--consumer-protocol amqp``);
- ``pub``: 1 MQTT publisher, no subscriber (what the client alone can send).

    .venv/bin/python bench/perf_mqtt_bench.py [--messages 40000] [--runs 3]
        [--brokers roost,rabbitmq]
        [--clients codec,paho]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling module, not a package

SHAPES = {
    "qos0": ["-x", "1", "-y", "1"],
    "qos1": ["-x", "1", "-y", "1", "-c", "100"],
    "amqp": ["-x", "1", "-y", "1", "--consumer-protocol", "amqp", "-q", "500"],
    "pub": ["-x", "1", "-y", "0"],
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_perf(url: str, mqtt_port: int, shape: list[str], messages: int,
             client: str, topic: str) -> dict[str, float]:
    before = children_cpu()
    done = subprocess.run(
        [*_brokers._roost_command(), "perf", "--url", url, "--protocol", "mqtt",
         "--mqtt-url", f"mqtt://127.0.0.1:{mqtt_port}", "--mqtt-client", client,
         "-C", str(messages), "-u", topic, *shape],
        capture_output=True, text=True, timeout=600, check=False)
    report = json.loads(done.stdout.splitlines()[-1])
    if done.returncode or report.get("errors"):
        raise RuntimeError(done.stdout[-2000:] + done.stderr[-2000:])
    cpu = children_cpu() - before
    moved = report["published"] + report["consumed"]
    return {"sent": report["publish_rate"], "received": report["consume_rate"],
            "p50_ms": (report["latency_us"] or {}).get("p50", 0) / 1000,
            "perf_us": cpu / moved * 1e6 if moved else 0.0}


def broker(name: str, port: int) -> AbstractContextManager[str]:
    if name == "roost":
        return _brokers.roost("--mqtt-port", str(port))
    return _brokers.rabbitmq(plugins=("rabbitmq_mqtt",),
                             extra_conf=f"mqtt.listeners.tcp.default = 127.0.0.1:{port}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--clients", default="codec,paho")
    args = parser.parse_args()
    figures: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    names, clients = args.brokers.split(","), args.clients.split(",")
    for name in names:
        port = _brokers.free_port()
        with broker(name, port) as url:
            for _ in range(args.runs):
                for client in clients:
                    for shape, flags in SHAPES.items():
                        figures.setdefault((client, name, shape), []).append(
                            run_perf(url, port, flags, args.messages, client,
                                     f"bench-{client}-{shape}"))
    print(f"roost perf --protocol mqtt -C {args.messages}, medians of {args.runs}")
    print(f"{'client':6} {'shape':6} {'broker':9} {'sent/s':>9} {'recv/s':>9} {'p50 ms':>8} "
          f"{'perf CPU us/msg':>16}")
    for client in clients:
        for shape in SHAPES:
            for name in names:
                runs = figures[(client, name, shape)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                print(f"{client:6} {shape:6} {name:9} {med['sent']:9,.0f} "
                      f"{med['received']:9,.0f} {med['p50_ms']:8.1f} {med['perf_us']:16.1f}")
            if len(names) == 2:
                a, b = (statistics.median(r["received"] or r["sent"]
                                          for r in figures[(client, n, shape)]) for n in names)
                print(f"{client:6} {shape:6} {'ratio':9} {a / b if b else 0:9.2f}x "
                      f"({names[0]}/{names[1]})")


if __name__ == "__main__":
    main()
