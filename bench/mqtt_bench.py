"""MQTT publish -> consume, Roost next to RabbitMQ 3.10's rabbitmq_mqtt plugin in the same
run, MQTT 3.1.1 over TCP, with pipelining clients made of Roost's codec
(``bench/_mqtt_raw.py``: publishers write 100 PUBLISHes a write, a QoS 1 publisher keeps
up to 1,000 unacknowledged, subscribers PUBACK once per read):

- ``QoS 0``: 1 publisher -> 1 subscriber, QoS 0 publishes and subscription;
- ``QoS 1``: 1 publisher -> 1 subscriber, QoS 1 both ways (PUBACKs to and from the broker);
- ``fan-out``: 1 publisher -> ``--fanout`` subscribers (default 100) of one topic, QoS 0;
  deliveries per second;
- ``idle``: ``--idle`` connected, subscribed, silent clients (default 2,000): broker RSS
  growth per connection.

A run is timed from the first publish to the last message received by every subscriber;
the table shows the median of ``--runs`` runs per shape, the ratio Roost/RabbitMQ, and
each broker's peak RSS (VmHWM) over the whole run.

    .venv/bin/python bench/mqtt_bench.py [--messages 50000] [--size 1024] [--runs 3]
        [--fanout 100] [--idle 2000] [--brokers roost,rabbitmq]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import _brokers  # sibling modules, not a package
from _measure import broker_pid, rss_mb
from _mqtt_raw import RawClient


async def one_to_n(port: int, qos: int, messages: int, size: int, subscribers: int,
                   tag: str) -> float:
    topic = f"bench/{tag}"
    subs = [await RawClient.connect(port, f"sub-{tag}-{i}") for i in range(subscribers)]
    for sub in subs:
        await sub.subscribe(topic, qos)
    pub = await RawClient.connect(port, f"pub-{tag}")
    start = time.perf_counter()
    receivers = [asyncio.create_task(sub.receive(messages)) for sub in subs]
    await pub.publish(topic, b"x" * size, messages, qos)
    await asyncio.wait_for(asyncio.gather(*receivers), 300)
    elapsed = time.perf_counter() - start
    for client in (pub, *subs):
        await client.close()
    return messages * subscribers / elapsed


async def idle(port: int, count: int, pid: int, tag: str) -> float:
    """KiB of broker RSS per connected, subscribed, silent client."""
    await asyncio.sleep(0.5)
    before = rss_mb(pid)
    clients = []
    for i in range(count):
        client = await RawClient.connect(port, f"idle-{tag}-{i}")
        await client.subscribe(f"idle/{tag}/{i}", 1)
        clients.append(client)
    await asyncio.sleep(1.0)
    after = rss_mb(pid)
    for client in clients:
        await client.close()
    return (after - before) * 1024 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fanout", type=int, default=100)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # brokers inherit it
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    shapes = ["QoS 0", "QoS 1", f"fan-out 1->{args.fanout}"]
    results: dict[str, dict[str, float]] = {}
    extra: dict[str, dict[str, float]] = {}
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
            # idle connections first, while the broker's heap is still its start's
            per_conn = asyncio.run(idle(port, args.idle, pid, name)) if args.idle else 0.0
            rates: dict[str, list[float]] = {s: [] for s in shapes}
            fan_messages = max(1, args.messages // args.fanout * 2)
            plans = [(0, 1, args.messages), (1, 1, args.messages),
                     (0, args.fanout, fan_messages)]
            for run in range(args.runs):
                for shape, (qos, subs, n) in zip(shapes, plans, strict=True):
                    rate = asyncio.run(one_to_n(port, qos, n, args.size, subs,
                                                f"{name}-{run}-{qos}-{subs}"))
                    rates[shape].append(rate)
            results[name] = {s: statistics.median(r) for s, r in rates.items()}
            extra[name] = {"idle": per_conn, "peak": rss_mb(pid, "VmHWM")}
    names = list(results)
    print(f"\nMQTT 3.1.1, {args.size} B payloads, median of {args.runs} runs; "
          f"msg/s (fan-out: deliveries/s)")
    print(f"{'shape':<18}" + "".join(f"{_brokers.TITLES[n]:>12}" for n in names)
          + ("       ratio" if len(names) == 2 else ""))
    for shape in shapes:
        row = f"{shape:<18}" + "".join(f"{results[n][shape]:>12,.0f}" for n in names)
        if len(names) == 2:
            row += f"{results[names[0]][shape] / results[names[1]][shape]:>11.2f}x"
        print(row)
    if args.idle:
        print(f"{'idle, KiB/conn':<18}" + "".join(f"{extra[n]['idle']:>12.1f}" for n in names)
              + f"   ({args.idle} subscribed idle connections)")
    print(f"{'peak RSS, MB':<18}" + "".join(f"{extra[n]['peak']:>12.0f}" for n in names))


if __name__ == "__main__":
    main()
