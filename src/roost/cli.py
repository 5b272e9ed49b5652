"""The ``roost`` command."""

from __future__ import annotations

import argparse
import getpass
import sys

from roost import __version__, _build, config_sources, logs


def _server(args: argparse.Namespace) -> int:
    from roost.server_process import run

    try:
        cfg = config_sources.load(args)
    except (ValueError, OSError) as exc:
        print(f"roost: {exc}", file=sys.stderr)
        return 2
    try:
        logs.configure(
            level_name=cfg.log_level,
            console=cfg.log_console,
            console_level=cfg.log_console_level,
            console_format=cfg.log_format,
            file=cfg.log_file,
            file_level=cfg.log_file_level,
            file_format=cfg.log_file_format,
            categories=cfg.log_categories,
        )
    except OSError as exc:
        print(f"roost: cannot open the log file: {exc}", file=sys.stderr)
        return 2
    from roost.cluster.errors import ClusterError

    try:
        return run(cfg)
    except (ValueError, OSError, ClusterError) as exc:  # a bad users file, a port in use,
        print(f"roost: {exc}", file=sys.stderr)  # etcd out of reach, a node name taken
        return 2


def _hash_password(args: argparse.Namespace) -> int:
    from roost.core.auth import hash_password

    password = args.password if args.password is not None else getpass.getpass("Password: ")
    print(hash_password(password))
    return 0


def _ctl(args: argparse.Namespace) -> int:
    from roost.ctl.commands import run

    return run(args)


def _pipeline(args: argparse.Namespace) -> int:
    from roost.pipeline.cli import run

    return run(args)


def _perf(args: argparse.Namespace) -> int:
    from roost.perf.cli import run

    return run(args)


def _cluster_up(args: argparse.Namespace) -> int:
    from roost.cluster.local import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="roost", description=__doc__)
    parser.add_argument(
        "--version", action="version", version=f"roost {__version__}, {_build.describe()}"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    server = sub.add_parser("server", help="run the broker", description="Run the broker.")
    config_sources.add_arguments(server)
    server.set_defaults(func=_server)

    users = sub.add_parser("users", help="user helpers")
    users_sub = users.add_subparsers(dest="users_command", required=True)
    hp = users_sub.add_parser(
        "hash-password", help="print a password hash for the users file"
    )
    hp.add_argument("password", nargs="?", help="the password (prompted when omitted)")
    hp.set_defaults(func=_hash_password)

    from roost.perf.cli import add_arguments as add_perf_arguments

    perf = sub.add_parser(
        "perf",
        help="load generator for any AMQP 0-9-1 broker",
        description="Publish and consume against an AMQP 0-9-1 broker and report rates.",
    )
    add_perf_arguments(perf)
    perf.set_defaults(func=_perf)

    from roost.ctl.parser import add_arguments as add_ctl_arguments

    ctl = sub.add_parser(
        "ctl",
        help="operate a running broker through its management API",
        description="List, declare, delete, publish, get; users, vhosts, permissions, "
        "policies; definitions export/import. Talks HTTP to the management API.",
    )
    add_ctl_arguments(ctl)
    ctl.set_defaults(func=_ctl)

    from roost.ctl.parser import add_policies_arguments

    policies = sub.add_parser(
        "policies",
        help="list, set or clear policies of a running broker (management API)",
        description="List, set or clear policies (max-length, message-ttl, "
        "dead-letter-exchange, message-mutators, …). Talks HTTP to the management API; "
        "the same as 'roost ctl list policies' and 'roost ctl policy set|clear'.",
    )
    add_policies_arguments(policies)
    policies.set_defaults(func=_ctl)

    cluster = sub.add_parser(
        "cluster",
        help="run a cluster of nodes on this machine (etcd + N nodes sharing the ports)",
        description="Nodes coordinated by etcd (docs/cluster.md).",
    )
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True)
    from roost.cluster.local import add_arguments as add_cluster_up_arguments

    up = cluster_sub.add_parser(
        "up",
        help="start a local etcd and N nodes sharing the AMQP, STOMP and HTTP ports",
        description="Start a local etcd and N 'roost server' nodes on this machine. The "
        "nodes share the client ports through SO_REUSEPORT, so the kernel spreads "
        "connections over them; Ctrl-C stops them all.",
    )
    add_cluster_up_arguments(up)
    up.set_defaults(func=_cluster_up)

    from roost.pipeline.cli import add_arguments as add_pipeline_arguments

    pipeline = sub.add_parser(
        "pipeline",
        help="ready-made PySpark jobs over streams (etl, traffic) and sample data",
        description="Run an example Spark pipeline against Roost streams.",
    )
    add_pipeline_arguments(pipeline)
    pipeline.set_defaults(func=_pipeline)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
