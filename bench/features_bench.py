"""What queue features cost: publish and delivery rates into a queue with dead-lettering,
TTL and a length limit set, against a plain queue, and priority-queue throughput; Roost
next to RabbitMQ (issue 6's benchmark), measured with ``roost perf``.

    .venv/bin/python bench/features_bench.py [--brokers roost,rabbitmq] [--repeat 3]
        [--duration 5] [--scenarios p1,f1,p0,f0,pr]

Each broker starts once; every scenario runs ``--repeat`` times per broker, brokers
alternating; the table shows medians (raw JSON lines in bench/results/). The "features"
queue has ``x-dead-letter-exchange: amq.fanout`` (bound to nothing: dead letters are
routed and dropped), ``x-message-ttl: 60000`` and ``x-max-length: 100000`` (drop-head, so
without a consumer every publish past 100,000 dead-letters the head).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _brokers  # a sibling module, not a package
from amqp_throughput import Scenario, run_scenarios, table

ONE_TO_ONE = ("--producers", "1", "--consumers", "1", "--size", "16", "--prefetch", "100")
NO_CONSUMER = ("--producers", "1", "--consumers", "0", "--size", "16")
FEATURES = (
    "--queue-arg", "x-dead-letter-exchange=amq.fanout",
    "--queue-arg", "x-message-ttl=60000",
    "--queue-arg", "x-max-length=100000",
)
PRIORITY = ("--queue-arg", "x-max-priority=10", "--priorities", "10")

SCENARIOS = {
    s.key: s
    for s in [
        Scenario("p1", "plain queue, 1 producer / 1 consumer, prefetch 100", ONE_TO_ONE),
        Scenario("f1", "DLX + TTL + max-length, 1 producer / 1 consumer, prefetch 100",
                 (*ONE_TO_ONE, *FEATURES)),
        Scenario("p0", "plain queue, no consumer (publish/s)", NO_CONSUMER),
        Scenario("f0", "DLX + TTL + max-length, no consumer (publish/s)",
                 (*NO_CONSUMER, *FEATURES)),
        Scenario("pr", "priority queue (10 levels, priorities 0-9 mixed), prefetch 100",
                 (*ONE_TO_ONE, *PRIORITY)),
    ]
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="roost,rabbitmq")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    args = parser.parse_args(argv)
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    if "rabbitmq" in brokers and not _brokers.rabbitmq_installed():
        print("RabbitMQ is not installed: skipping its columns", file=sys.stderr)
        brokers.remove("rabbitmq")
    scenarios = [SCENARIOS[k.strip()] for k in args.scenarios.split(",") if k.strip()]
    results, raw_path = run_scenarios("features_bench", brokers, scenarios, args.repeat,
                                      args.duration)
    print(f"msg/s = deliveries per second, or publishes per second where nothing consumes; "
          f"16 B bodies, manual acks; {args.repeat} run(s) of {args.duration:g} s, medians. "
          f"Raw results: {raw_path}\n")
    print(table(brokers, scenarios, results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
