"""``roost pipeline etl|traffic|generate``: ready-made Spark jobs and sample data.

Jobs run on ``local[*]`` by default; ``--master spark://HOST:7077`` runs the same code on
a cluster (checkpoints and outputs must then be on storage every node shares), and so does
``spark-submit --master spark://HOST:7077 "$(roost pipeline job-file)" etl …``.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from roost.pipeline.jobs import etl, traffic

    sub = parser.add_subparsers(dest="pipeline_command", required=True)
    for name, module, help_text in (
        ("etl", etl, "JSON orders -> validated, windowed totals (stream + Parquet)"),
        ("traffic", traffic, "per-window rates, latency percentiles, top keys + HTML report"),
    ):
        p = sub.add_parser(name, help=help_text, description=module.__doc__)
        _common(p)
        module.add_arguments(p)
        if name == "etl":
            p.add_argument("--checkpoint", default="roost-etl/checkpoints")
            p.add_argument("--once", action="store_true", help="process what is there, then stop")
        p.set_defaults(pipeline=name)
    g = sub.add_parser(
        "generate",
        help="publish sample JSON orders into a stream (or, with --traffic, run sample "
        "traffic through the broker for the traffic report)",
    )
    g.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    g.add_argument("--stream", default="orders")
    g.add_argument("--count", type=int, default=10_000)
    g.add_argument("--invalid-every", type=int, default=20)
    t = g.add_argument_group("--traffic: a small shop's queues, consumers and connections")
    t.add_argument("--traffic", action="store_true", help="run sample traffic instead")
    t.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
    t.add_argument("--rate", type=float, default=200.0, help="mean publishes per second")
    t.add_argument("--events-stream", default="roost.events",
                   help="the broker's --events-stream, checked to be there")
    g.set_defaults(pipeline="generate")
    f = sub.add_parser("job-file", help="print the path of the jobs' file for spark-submit")
    f.set_defaults(pipeline="job-file")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    p.add_argument("--master", default=None, help="Spark master (default local[*])")
    p.add_argument("--starting-offsets", default="earliest")


def run(args: argparse.Namespace) -> int:
    if args.pipeline == "job-file":
        from roost.pipeline.jobs import submit

        print(submit.__file__)
        return 0
    if args.pipeline == "generate" and args.traffic:
        from roost.pipeline.traffic_sample import generate_traffic

        counts = generate_traffic(args.url, args.seconds, args.rate, args.events_stream)
        print(f"generated {counts['published']:,} messages in {args.seconds:g} s", file=sys.stderr)
        return 0
    if args.pipeline == "generate":
        from roost.pipeline.generate import generate

        n = generate(args.url, args.stream, args.count, invalid_every=args.invalid_every)
        print(f"published {n} orders to stream {args.stream!r}")
        return 0
    from roost.pipeline.session import run_queries, spark_session

    spark = spark_session(f"roost-{args.pipeline}", args.master)
    # where the job runs and with what: under spark-submit, its --conf decides these
    print(
        f"[{args.pipeline}] Spark {spark.version}, master {spark.sparkContext.master}, "
        f"{spark.conf.get('spark.sql.shuffle.partitions')} shuffle partitions",
        file=sys.stderr,
    )
    try:
        if args.pipeline == "etl":
            from roost.pipeline.jobs import etl

            run_queries(etl.build(spark, args), label="etl")
            print(f"etl done: totals in {args.results!r} and {args.output}", file=sys.stderr)
        else:
            from roost.pipeline.jobs import traffic

            return traffic.run(spark, args)
    finally:
        spark.stop()
    return 0
