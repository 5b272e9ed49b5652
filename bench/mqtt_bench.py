"""MQTT publish -> consume throughput, Roost next to RabbitMQ 3.10's rabbitmq_mqtt plugin in
the same run: one paho publisher and one paho subscriber on one topic, QoS 0 and QoS 1
(1 KiB payloads by default; the QoS 1 publisher keeps up to 100 PUBLISHes unacknowledged,
paho's max_inflight_messages). A run is timed from the first publish to the last message
received; the table shows the median of the runs, the ratio Roost/RabbitMQ, and the
broker's peak RSS (VmHWM) after all runs.

    .venv/bin/python bench/mqtt_bench.py [--messages 20000] [--size 1024] [--runs 3]
        [--brokers roost,rabbitmq]

Both brokers are driven by the same Python client, so the client's own speed (paho runs
~20-40k small messages/s per process) caps what either broker can show here.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # sibling modules, not a package
import paho.mqtt.client as mqtt
from _measure import broker_pid, rss_mb
from paho.mqtt.enums import CallbackAPIVersion


def _client(port: int, client_id: str) -> tuple[mqtt.Client, threading.Event]:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv311)
    client.username_pw_set("guest", "guest")
    client.max_inflight_messages_set(100)
    client.max_queued_messages_set(0)
    connected = threading.Event()
    client.on_connect = lambda *a: connected.set()
    client.connect("127.0.0.1", port, keepalive=60)
    client.loop_start()
    if not connected.wait(10):
        raise RuntimeError("no CONNACK")
    return client, connected


def one_run(port: int, qos: int, messages: int, size: int, tag: str) -> float:
    topic = f"bench/{tag}"
    done = threading.Event()
    count = [0]

    def on_message(_c: Any, _u: Any, _m: Any) -> None:
        count[0] += 1
        if count[0] == messages:
            done.set()

    sub, _ = _client(port, f"sub-{tag}")
    subscribed: queue.Queue[int] = queue.Queue()
    sub.on_subscribe = lambda *a: subscribed.put(1)
    sub.on_message = on_message
    sub.subscribe(topic, qos)
    subscribed.get(timeout=10)
    pub, _ = _client(port, f"pub-{tag}")
    payload = b"x" * size
    start = time.perf_counter()
    infos = [pub.publish(topic, payload, qos=qos) for _ in range(messages)]
    done.wait(120)
    elapsed = time.perf_counter() - start
    if qos:
        infos[-1].wait_for_publish(30)
    for client in (pub, sub):
        client.disconnect()
        client.loop_stop()
    if count[0] < messages:
        print(f"  {tag}: only {count[0]} of {messages} arrived", file=sys.stderr)
    return count[0] / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    args = parser.parse_args()
    results: dict[str, dict[int, float]] = {}
    peaks: dict[str, float] = {}
    for name in args.brokers.split(","):
        port = _brokers.free_port()
        if name == "roost":
            launcher = _brokers.roost("--mqtt-port", str(port))
        else:
            launcher = _brokers.rabbitmq(
                plugins=("rabbitmq_mqtt",),
                extra_conf=f"mqtt.listeners.tcp.default = 127.0.0.1:{port}\n",
            )
        with launcher as url:
            time.sleep(0.5 if name == "roost" else 2.0)  # plugin listeners start last
            pid = broker_pid(url)
            rates: dict[int, list[float]] = {0: [], 1: []}
            for run in range(args.runs):
                for qos in (0, 1):
                    rates[qos].append(one_run(port, qos, args.messages, args.size,
                                              f"{name}-{run}-q{qos}"))
            results[name] = {q: statistics.median(r) for q, r in rates.items()}
            peaks[name] = rss_mb(pid, "VmHWM")
    print(f"\nMQTT 3.1.1, 1 publisher -> 1 subscriber, {args.messages} x {args.size} B, "
          f"median of {args.runs} runs (msg/s)")
    names = list(results)
    print(f"{'shape':<10}" + "".join(f"{_brokers.TITLES[n]:>12}" for n in names)
          + ("       ratio" if len(names) == 2 else ""))
    for qos in (0, 1):
        row = f"{'QoS ' + str(qos):<10}" + "".join(f"{results[n][qos]:>12,.0f}" for n in names)
        if len(names) == 2:
            row += f"{results[names[0]][qos] / results[names[1]][qos]:>11.2f}x"
        print(row)
    print(f"{'peak RSS':<10}" + "".join(f"{peaks[n]:>10.0f}MB" for n in names))


if __name__ == "__main__":
    main()
